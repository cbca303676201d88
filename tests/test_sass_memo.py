"""The recorded disassemblies of the test suite (tests/sass_memo.py): a recorded listing is the
disassembler's own output for the same cubin bytes, and anything else (one byte of the cubin,
another disassembler binary, other flags) reads nothing. No GPU needed (NVRTC and nvdisasm)."""

from __future__ import annotations

from pathlib import Path

import pytest

import sass_memo
from gemmlab.gpu import sass
from gemmlab.gpu.compile import CompileOptions, compile_kernel

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the kernel every check here disassembles (its first instance in the suite: tests/test_sass_memo.py)
SOURCE = REPO_ROOT / "kernels" / "naive.cu"


@pytest.fixture(scope="module")
def compiled():
    """``(argv, described, cubin)``: naive.cu for sm_90 and the disassembler found here."""
    argv, described = sass.find_disassembler()
    if argv is None:
        pytest.skip(f"no disassembler here: {described}")
    compiled = compile_kernel(SOURCE, "gemm_naive<16, 16>", CompileOptions(arch="90"), disassemble=False)
    return argv, described, bytes(compiled.object_code.code)


def test_the_committed_listing_is_the_disassemblers_own(compiled):
    """The committed entry for this cubin (recorded with ``GEMMLAB_TEST_SASS_RECORD=1``) is what
    the disassembler prints now, byte for byte, and the memoized ``disassemble`` of the tests
    gives the unmemoized one's summary and text."""
    argv, described, cubin = compiled
    memoized = sass.disassemble(cubin)  # with GEMMLAB_TEST_SASS_RECORD=1 a miss is recorded here
    recorded = sass_memo.lookup(argv, cubin)
    if recorded is None:
        pytest.skip(f"no listing recorded for this cubin by this disassembler ({described}): "
                    "another NVRTC or disassembler build; record with GEMMLAB_TEST_SASS_RECORD=1")
    real = getattr(sass.disassemble, "__wrapped__", sass.disassemble)
    summary, text = real(cubin)
    assert summary["error"] is None and text == recorded
    assert sass.summarize(recorded, described) == summary
    assert memoized == (summary, text)


def test_a_recording_is_read_back_only_for_the_same_input(compiled, tmp_path, monkeypatch):
    """A listing recorded into a folder is read back for the same cubin, disassembler binary and
    flags, and for nothing else: one changed byte of the cubin, another binary, other flags."""
    argv, _, cubin = compiled
    sass_memo.record(argv, cubin, "LISTING", folder=tmp_path)
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) == "LISTING"
    changed = bytes([cubin[0] ^ 1]) + cubin[1:]
    assert sass_memo.lookup(argv, changed, folder=tmp_path) is None
    assert sass_memo.lookup([*argv, "-hex"], cubin, folder=tmp_path) is None
    other = tmp_path / "bin" / Path(argv[0]).name
    other.parent.mkdir()
    other.write_bytes(Path(argv[0]).read_bytes() + b"\0")
    assert sass_memo.lookup([str(other), *argv[1:]], cubin, folder=tmp_path) is None
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == [f"{sass_memo.key(argv, cubin)}.sass.xz"]


def test_recording_is_off_unless_asked(monkeypatch):
    """Misses are written into the committed folder only with ``GEMMLAB_TEST_SASS_RECORD=1``."""
    monkeypatch.delenv(sass_memo.RECORD_ENV, raising=False)
    assert not sass_memo.recording()
    monkeypatch.setenv(sass_memo.RECORD_ENV, "1")
    assert sass_memo.recording()
