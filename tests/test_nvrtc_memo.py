"""The recorded NVRTC compilations of the test suite (tests/nvrtc_memo.py): a recorded output is
NVRTC's own for the same inputs; a file is read only for the inputs its name and first line say,
with the cubin it says; anything else reads nothing and compiles. No GPU needed (NVRTC)."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

import cuda.core
import nvrtc_memo
import sass_memo
from gemmlab.gpu import compile as nvrtc
from gemmlab.gpu.compile import CompileOptions, compile_kernel

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCE = REPO_ROOT / "kernels" / "naive.cu"
NAIVE = ("gemm_naive<16, 16>",)


def _dirs(source: Path) -> list[str]:
    """The include folders :func:`gemmlab.gpu.compile.compile_kernel` gives NVRTC for ``source``."""
    return [str(source.resolve().parent), str(nvrtc.shared_include_dir()), *nvrtc.cuda_include_dirs()[0]]


def _args(source: Path = SOURCE, names: tuple[str, ...] = NAIVE, **options):
    """``run_nvrtc``'s arguments for ``source`` (naive.cu's 16 x 16 instance for sm_90 by default)."""
    return source, source.read_text(), CompileOptions(arch="90", **options), _dirs(source), names


def _keyed(args) -> dict:
    """``nvrtc_memo.inputs`` of ``args``; the test skips, saying why, where this machine's toolchain
    cannot be keyed (then the memo reads and records nothing and every kernel compiles)."""
    found = nvrtc_memo.inputs(*args)
    if found is None:
        headers = nvrtc.cuda_include_dirs()
        why = ("NVRTC's library not found" if nvrtc_memo.nvrtc_files() is None else
               f"CUDA's headers are not from their pip wheels ({headers[1]}; {', '.join(headers[0])})"
               if "absent" in headers[1] else "see tests/nvrtc_memo.py's inputs()")
        pytest.skip(f"tests/nvrtc_memo.py keys no compilation here: {why}")
    return found


def _real(*args):
    """``(cubin, symbols, log)`` from NVRTC itself (the tests' memo bypassed)."""
    code, log = getattr(nvrtc.run_nvrtc, "__wrapped__", nvrtc.run_nvrtc)(*args)
    return bytes(code.code), nvrtc_memo.symbols_of(code), log


def test_the_committed_entry_is_nvrtcs_own():
    """The committed entry for naive.cu's 16 x 16 instance (recorded with
    ``GEMMLAB_TEST_NVRTC_RECORD=1``) is what NVRTC returns now: the same cubin bytes and symbols,
    the same log but for ptxas's compile time; and compile_kernel through the memo reports what it
    reports from NVRTC. Where the folder was recorded with this very toolchain (RECORDED.json) the
    entry must be there; with another one the test says what differs."""
    args = _args()
    found = _keyed(args)
    recorded = nvrtc_memo.lookup(found)
    if recorded is None:
        sass_memo.missing_entry(nvrtc_memo.MEMO_DIR, f"{nvrtc_memo.name_of(found)}.nvrtc.xz",
                                nvrtc_memo.toolchain(found), nvrtc_memo.RECORD_ENV, f"NVRTC {nvrtc.nvrtc_version()}")
    cubin, symbols, log = _real(*args)
    assert (recorded[0], recorded[1]) == (cubin, symbols)
    assert nvrtc_memo.timeless(recorded[2]) == nvrtc_memo.timeless(log) and "Compiling entry function" in log
    memo = compile_kernel(SOURCE, NAIVE[0], CompileOptions(arch="90"), disassemble=False)
    assert bytes(memo.object_code.code) == cubin and memo.lowered_name == symbols[NAIVE[0]]
    assert memo.resources == nvrtc.parse_ptxas(log, symbols[NAIVE[0]]) and memo.resources.registers > 0


def test_every_committed_entry_is_named_by_the_inputs_it_records():
    """Each committed file's first line holds the inputs its name is the hash of (a file copied or
    renamed over another entry's name fails here), and the folder says what recorded it."""
    wrong = sass_memo.misnamed_entries(nvrtc_memo.MEMO_DIR, ".nvrtc.xz", nvrtc_memo.HEADER, nvrtc_memo.name_of)
    if wrong is None:
        pytest.skip("tests/data/nvrtc_memo holds no recordings")
    assert nvrtc_memo.recorded_with(), "tests/data/nvrtc_memo/RECORDED.json is missing or empty"
    assert wrong == []


@pytest.fixture(scope="module")
def naive():
    """``(args, inputs, (cubin, symbols, log))``: naive.cu's 16 x 16 instance from NVRTC itself."""
    args = _args()
    return args, _keyed(args), _real(*args)


def test_a_recording_is_read_back_only_for_the_same_inputs(naive, tmp_path, monkeypatch):
    """A compilation recorded into a folder is read back for the same inputs and for nothing else:
    a source changed by a comment, other options (a register cap), other name expressions, a
    changed header, another NVRTC library; nor from a file copied over another's name, with a
    cubin other than the one recorded beside it, without a code section for a lowered name, or
    damaged."""
    args, found, output = naive
    assert nvrtc_memo.record(found, *output, folder=tmp_path)
    assert nvrtc_memo.lookup(found, folder=tmp_path) == output
    name = tmp_path / f"{nvrtc_memo.name_of(found)}.nvrtc.xz"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name.name, nvrtc_memo.MANIFEST])
    assert [c["nvrtc_version"] for c in nvrtc_memo.recorded_with(tmp_path)] == [nvrtc.nvrtc_version()]
    source, text, options, dirs, names = args
    assert nvrtc_memo.lookup(nvrtc_memo.inputs(source, text + "// x\n", options, dirs, names), tmp_path) is None
    assert nvrtc_memo.lookup(nvrtc_memo.inputs(*_args(max_registers=32)), tmp_path) is None
    assert nvrtc_memo.lookup(nvrtc_memo.inputs(*_args(names=("gemm_naive<4, 64>",))), tmp_path) is None
    # a header: the source beside it includes it; one changed byte of it is another input
    own = tmp_path / "src"
    own.mkdir()
    (own / "tile.cuh").write_text("#define TILE 16\n")
    (own / "k.cu").write_text('#include "tile.cuh"\n' + text)
    with_header = nvrtc_memo.inputs(*_args(own / "k.cu"))
    assert nvrtc_memo.record(with_header, *_real(*_args(own / "k.cu")), folder=tmp_path)
    assert nvrtc_memo.lookup(with_header, tmp_path) is not None
    (own / "tile.cuh").write_text("#define TILE 17\n")
    assert nvrtc_memo.lookup(nvrtc_memo.inputs(*_args(own / "k.cu")), tmp_path) is None
    # an include folder of no known role: nothing to key, nothing read
    assert nvrtc_memo.inputs(source, text, options, [*dirs, str(tmp_path)], names) is None
    # another NVRTC library (its builtins here): another input
    other = {**found["nvrtc"], next(iter(found["nvrtc"])): "0" * 64}
    monkeypatch.setattr(nvrtc_memo, "nvrtc_files", lambda: other)
    assert nvrtc_memo.lookup(nvrtc_memo.inputs(*args), tmp_path) is None
    monkeypatch.undo()
    # options given as tuples (defines) read back as the JSON of a first line does
    defined = nvrtc_memo.inputs(*_args(defines=(("TILE_UNUSED", "3"),)))
    assert defined is not None and defined != found
    assert nvrtc_memo.record(defined, *_real(*_args(defines=(("TILE_UNUSED", "3"),))), folder=tmp_path)
    assert nvrtc_memo.lookup(defined, tmp_path) is not None
    # what the scan cannot follow: no inputs, NVRTC always runs
    (own / "m.cu").write_text('#define HDR "tile.cuh"\n#include HDR\n' + text)
    (own / "h.cu").write_text('#if __has_include("extra.cuh")\n#endif\n' + text)
    assert nvrtc_memo.inputs(*_args(own / "m.cu")) is None and nvrtc_memo.inputs(*_args(own / "h.cu")) is None
    # NVRTC's builtins library is an input as well as NVRTC itself
    assert any("builtins" in f for f in found["nvrtc"]) and len(found["nvrtc"]) >= 2
    # another compilation's file copied over this one's name: its first line gives it away
    name.write_bytes((tmp_path / f"{nvrtc_memo.name_of(with_header)}.nvrtc.xz").read_bytes())
    assert nvrtc_memo.lookup(found, tmp_path) is None
    cubin, symbols, log = output
    # the right first line with another cubin than the one recorded beside it
    data = lzma.decompress(_recorded(found, output, tmp_path / "c"))
    head, meta, body = data.split(b"\n", 2)
    name.write_bytes(lzma.compress(b"\n".join([head, meta, body[:-1] + bytes([body[-1] ^ 1])])))
    assert nvrtc_memo.lookup(found, tmp_path) is None
    # symbols naming a function the cubin has no code for, for other name expressions, or a log
    # without ptxas's report of the function
    assert nvrtc_memo.record(found, cubin, {n: v + "x" for n, v in symbols.items()}, log, folder=tmp_path)
    assert nvrtc_memo.lookup(found, tmp_path) is None
    assert nvrtc_memo.record(found, cubin, {**symbols, "k<2>": next(iter(symbols.values()))}, log, folder=tmp_path)
    assert nvrtc_memo.lookup(found, tmp_path) is None
    assert nvrtc_memo.record(found, cubin, symbols, log.replace("Compiling entry function", "x"), folder=tmp_path)
    assert nvrtc_memo.lookup(found, tmp_path) is None
    assert nvrtc_memo.record(found, *output, folder=tmp_path)
    name.write_bytes(name.read_bytes()[:-40])  # a damaged file (xz's check) is a miss too
    assert nvrtc_memo.lookup(found, tmp_path) is None


def _recorded(found, output, folder: Path) -> bytes:
    assert nvrtc_memo.record(found, *output, folder=folder)
    return (folder / f"{nvrtc_memo.name_of(found)}.nvrtc.xz").read_bytes()


def test_prune_names_the_recordings_of_sources_and_headers_no_longer_in_the_checkout(naive, tmp_path):
    """``nvrtc_memo.stale`` (``tests/sass_memo.py --prune``): a recording of a source whose file
    name the checkout tracks, but in another version, or with a tracked header in another version,
    is stale; a source or header the checkout does not track (a test's own) is kept; a cubin is
    gone only where no kept recording makes it too."""
    import hashlib
    _, found, (cubin, symbols, log) = naive
    older = dict(found, source_sha256="0" * 64)
    with_header = dict(found, headers=[*found["headers"], ["gemmlab/tile.cuh", "1" * 64]])
    for f in (found, older, with_header):
        assert nvrtc_memo.record(f, cubin, symbols, log, folder=tmp_path)
    name = {id(f): f"{nvrtc_memo.name_of(f)}.nvrtc.xz" for f in (found, older, with_header)}
    made = hashlib.sha256(cubin).hexdigest()
    assert nvrtc_memo.stale(tmp_path, {}) == ([], set(), {made})  # nothing tracked by these names: all kept
    program, digest = found["program"], found["source_sha256"]
    assert nvrtc_memo.stale(tmp_path, {program: {digest}}) == ([name[id(older)]], {made}, {made})
    names, gone, kept = nvrtc_memo.stale(tmp_path, {program: {digest}, "tile.cuh": {"2" * 64}})
    assert sorted(names) == sorted([name[id(older)], name[id(with_header)]])
    assert nvrtc_memo.stale(tmp_path, {program: {"3" * 64}})[1:] == ({made}, set())  # every recording of it stale


def test_what_is_never_recorded(naive, tmp_path):
    """Not recorded: an empty log (NVRTC 13.0's for a repeat), inputs that cannot be told, and an
    output that names a folder of this machine."""
    args, found, (cubin, symbols, log) = naive
    assert not nvrtc_memo.record(found, cubin, symbols, "", folder=tmp_path)
    assert not nvrtc_memo.record(None, cubin, symbols, log, folder=tmp_path)
    assert not list(tmp_path.iterdir())
    source, _, _, dirs, _ = args
    assert not nvrtc_memo.local(source, dirs, cubin, log)
    assert nvrtc_memo.local(source, dirs, cubin, log + f"{dirs[1]}/gemmlab/x.cuh(3): warning")
    assert nvrtc_memo.local(source, dirs, cubin + str(source.resolve()).encode(), log)


def test_verify_compiles_a_hit_and_fails_on_a_difference(naive, tmp_path, monkeypatch):
    """With ``GEMMLAB_TEST_NVRTC_VERIFY=1`` the tests' ``run_nvrtc`` compares a recorded output with
    NVRTC's: an entry whose log was edited (another register count; same first line, same cubin)
    fails the call that reads it. Without it such an edit is trusted (the files are reviewed like
    tests/data/sass_memo): compile_kernel then reports the edited count."""
    args, found, (cubin, symbols, log) = naive
    edited = log.replace("Used ", "Used 1", 1)
    assert edited != log
    assert nvrtc_memo.record(found, cubin, symbols, edited, folder=tmp_path)
    monkeypatch.setattr(nvrtc_memo, "MEMO_DIR", tmp_path)
    monkeypatch.delenv(nvrtc_memo.VERIFY_ENV, raising=False)
    assert nvrtc.run_nvrtc(*args)[1] == edited
    monkeypatch.setenv(nvrtc_memo.VERIFY_ENV, "1")
    with pytest.raises(AssertionError, match="differs from what NVRTC returns"):
        nvrtc.run_nvrtc(*args)
    # another cubin with the same symbols and log (no FMA contraction): consistent, and still caught
    other, _, _ = _real(*_args(fma=False))
    assert other != cubin
    assert nvrtc_memo.record(found, other, symbols, log, folder=tmp_path)
    with pytest.raises(AssertionError, match="differs from what NVRTC returns"):
        nvrtc.run_nvrtc(*args)
    monkeypatch.delenv(nvrtc_memo.VERIFY_ENV)
    assert bytes(nvrtc.run_nvrtc(*args)[0].code) == other


def test_record_mode_writes_a_miss_and_never_a_local_output(tmp_path, monkeypatch):
    """With ``GEMMLAB_TEST_NVRTC_RECORD=1`` the tests' ``run_nvrtc`` records a miss, which the next
    call reads; an output that names this machine's folders (a header's ``__FILE__`` in the cubin)
    is compiled every time and never recorded."""
    memo = tmp_path / "memo"
    monkeypatch.setattr(nvrtc_memo, "MEMO_DIR", memo)
    monkeypatch.setenv(nvrtc_memo.RECORD_ENV, "1")
    args = _args()
    nvrtc.run_nvrtc(*args)
    assert nvrtc_memo.lookup(_keyed(args)) is not None
    own = tmp_path / "src"
    own.mkdir()
    (own / "where.cuh").write_text("__device__ const char *where() { return __FILE__; }\n")
    (own / "k.cu").write_text('#include "where.cuh"\n'
                              "__global__ void k(const char **out) { *out = where(); }\n")
    local = _args(own / "k.cu", names=("k",))
    code, log = nvrtc.run_nvrtc(*local)
    assert str(own / "where.cuh").encode() in bytes(code.code)
    assert nvrtc_memo.inputs(*local) is not None and nvrtc_memo.lookup(nvrtc_memo.inputs(*local)) is None
    assert len(list(memo.glob("*.nvrtc.xz"))) == 1


def test_a_patched_program_is_always_run(naive, tmp_path, monkeypatch):
    """Where a test patches cuda.core's ``Program`` (an emulated NVRTC), the tests' ``run_nvrtc``
    runs the patch, even for a recorded compilation."""
    args, found, output = naive
    assert nvrtc_memo.record(found, *output, folder=tmp_path)
    monkeypatch.setattr(nvrtc_memo, "MEMO_DIR", tmp_path)
    assert bytes(nvrtc.run_nvrtc(*args)[0].code) == output[0]

    class Emulated:
        def __init__(self, *a, **k):
            raise RuntimeError("emulated NVRTC")

    monkeypatch.setattr(cuda.core, "Program", Emulated)
    with pytest.raises(RuntimeError, match="emulated NVRTC"):
        nvrtc.run_nvrtc(*args)


def test_recording_and_verifying_are_off_unless_asked(monkeypatch):
    """Misses are recorded into the committed folder only with ``GEMMLAB_TEST_NVRTC_RECORD=1``; hits
    are compiled again and compared only with ``GEMMLAB_TEST_NVRTC_VERIFY=1``."""
    for env, on in ((nvrtc_memo.RECORD_ENV, nvrtc_memo.recording), (nvrtc_memo.VERIFY_ENV, nvrtc_memo.verifying)):
        monkeypatch.delenv(env, raising=False)
        assert not on()
        monkeypatch.setenv(env, "1")
        assert on()
