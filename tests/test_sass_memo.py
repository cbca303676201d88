"""The recorded disassemblies of the test suite (tests/sass_memo.py): a recorded listing is the
disassembler's own output for the same cubin bytes; a file is read only for the inputs its name
and first line say, with the cubin's code sections; anything else reads nothing. No GPU needed
(NVRTC and nvdisasm)."""

from __future__ import annotations

from pathlib import Path

import pytest

import sass_memo
from gemmlab.gpu import sass
from gemmlab.gpu.compile import CompileOptions, compile_kernel

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCE = REPO_ROOT / "kernels" / "naive.cu"


def _compiled(name: str):
    """``(argv, described, cubin)``: naive.cu's ``name`` for sm_90 and the disassembler found here."""
    argv, described = sass.find_disassembler()
    if argv is None:
        pytest.skip(f"no disassembler here: {described}")
    compiled = compile_kernel(SOURCE, name, CompileOptions(arch="90"), disassemble=False)
    return argv, described, bytes(compiled.object_code.code)


@pytest.fixture(scope="module")
def compiled():
    """naive.cu at its defaults (16 x 16): the entry this module checks against the disassembler."""
    return _compiled("gemm_naive<16, 16>")


@pytest.fixture(scope="module")
def second():
    """``(argv, cubin, listing)`` of naive.cu at 4 x 64, which no other test disassembles (so the
    tests' memoized ``disassemble`` has not seen it): the disassembler's own listing."""
    argv, _, cubin = _compiled("gemm_naive<4, 64>")
    real = getattr(sass.disassemble, "__wrapped__", sass.disassemble)
    return argv, cubin, real(cubin)[1]


def test_the_committed_listing_is_the_disassemblers_own(compiled):
    """The committed entry for this cubin (recorded with ``GEMMLAB_TEST_SASS_RECORD=1``) is what
    the disassembler prints now, byte for byte, and the memoized ``disassemble`` of the tests
    gives the unmemoized one's summary and text. Where the folder was recorded with this very
    toolchain (RECORDED.json) the entry must be there; with another one the test says which."""
    argv, described, cubin = compiled
    memoized = sass.disassemble(cubin)  # with GEMMLAB_TEST_SASS_RECORD=1 a miss is recorded here
    recorded = sass_memo.lookup(argv, cubin)
    if recorded is None:
        sass_memo.missing_entry(sass_memo.MEMO_DIR, f"{sass_memo.key(argv, cubin)}.sass.xz",
                                sass_memo.toolchain(argv), sass_memo.RECORD_ENV, described)
    real = getattr(sass.disassemble, "__wrapped__", sass.disassemble)
    summary, text = real(cubin)
    assert summary["error"] is None and text == recorded
    assert sass.summarize(recorded, described) == summary
    assert memoized == (summary, text)


def test_every_committed_entry_is_named_by_the_inputs_it_records():
    """Each committed file's first line holds the inputs its name is the hash of (a file copied or
    renamed over another entry's name fails here), and the folder says what recorded it."""
    wrong = sass_memo.misnamed_entries(sass_memo.MEMO_DIR, ".sass.xz", sass_memo.HEADER, sass_memo.name_of)
    if wrong is None:
        pytest.skip("tests/data/sass_memo holds no recordings")
    assert sass_memo.recorded_with(), "tests/data/sass_memo/RECORDED.json is missing or empty"
    assert wrong == []


def test_a_recording_is_read_back_only_for_the_same_input(compiled, second, tmp_path):
    """A listing recorded into a folder is read back for the same cubin, disassembler binary and
    flags, and for nothing else: one changed byte of the cubin, another binary, other flags, a
    file copied over another key's name, a listing whose code sections are not the cubin's."""
    argv, _, cubin = compiled
    _, listing = sass.disassemble(cubin)  # nvdisasm's own (the test above)
    sass_memo.record(argv, cubin, listing, folder=tmp_path)
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) == listing
    name = tmp_path / f"{sass_memo.key(argv, cubin)}.sass.xz"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name.name, sass_memo.MANIFEST])
    assert sass_memo.recorded_with(tmp_path) == [sass_memo.toolchain(argv)]
    changed = bytes([cubin[0] ^ 1]) + cubin[1:]
    assert sass_memo.lookup(argv, changed, folder=tmp_path) is None
    assert sass_memo.lookup([*argv, "-hex"], cubin, folder=tmp_path) is None
    other = tmp_path / "bin" / Path(argv[0]).name
    other.parent.mkdir()
    other.write_bytes(Path(argv[0]).read_bytes() + b"\0")
    assert sass_memo.lookup([str(other), *argv[1:]], cubin, folder=tmp_path) is None
    # another kernel's file copied over this one's name: its first line gives it away
    argv2, cubin2, listing2 = second
    sass_memo.record(argv2, cubin2, listing2, folder=tmp_path / "b")
    name.write_bytes((tmp_path / "b" / f"{sass_memo.key(argv2, cubin2)}.sass.xz").read_bytes())
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) is None
    # the right first line over another kernel's listing: its code sections give it away
    sass_memo.record(argv, cubin, listing2, folder=tmp_path)
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) is None
    name.write_bytes(name.read_bytes()[:-40])  # a damaged file (xz's check) is a miss too
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) is None


def test_a_pack_holds_what_its_files_held(compiled, second, tmp_path, monkeypatch):
    """``sass_memo.pack`` moves a folder's recordings into its one xz tar: each reads back as from
    its own file, unpacked in memory or once into the session's shared folder; packing again gives
    the same bytes; a file recorded since is read before the pack's member of its name; the
    committed-entry check reads the pack's members too and catches one under another's name."""
    (argv, _, cubin), (argv2, cubin2, listing2) = compiled, second
    _, listing = sass.disassemble(cubin)
    sass_memo.record(argv, cubin, listing, folder=tmp_path)
    sass_memo.record(argv2, cubin2, listing2, folder=tmp_path)
    assert sass_memo.pack(tmp_path, ".sass.xz")[0] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([sass_memo.PACK, sass_memo.MANIFEST])
    monkeypatch.delenv(sass_memo.UNPACKED_ENV, raising=False)
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) == listing
    monkeypatch.setenv(sass_memo.UNPACKED_ENV, str(tmp_path / "shared"))
    assert sass_memo.lookup(argv2, cubin2, folder=tmp_path) == listing2
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) == listing
    assert len(list((tmp_path / "shared").iterdir())) == 2  # the unpacked folder and its lock
    packed = (tmp_path / sass_memo.PACK).read_bytes()
    assert sass_memo.pack(tmp_path, ".sass.xz") == (2, len(packed)) and (tmp_path / sass_memo.PACK).read_bytes() == packed
    sass_memo.record(argv, cubin, listing2, folder=tmp_path)  # recorded since: read before the member
    assert sass_memo.lookup(argv, cubin, folder=tmp_path) is None  # (another kernel's sections)
    assert sass_memo.misnamed_entries(tmp_path, ".sass.xz", sass_memo.HEADER, sass_memo.name_of) == []
    (tmp_path / f"{sass_memo.key(argv, cubin)}.sass.xz").rename(tmp_path / f"{'0' * 64}.sass.xz")
    assert sass_memo.misnamed_entries(tmp_path, ".sass.xz", sass_memo.HEADER, sass_memo.name_of) == [f"{'0' * 64}.sass.xz"]
    # packing only the files named, and dropping a member: the other file stays, the dropped entry is gone
    assert sass_memo.pack(tmp_path, ".sass.xz", only=[], drop=[f"{sass_memo.key(argv2, cubin2)}.sass.xz"])[0] == 1
    assert (tmp_path / f"{'0' * 64}.sass.xz").exists() and sass_memo.lookup(argv2, cubin2, folder=tmp_path) is None


def test_prune_names_the_listings_of_only_stale_cubins(compiled, second, tmp_path):
    """``sass_memo.stale_listings`` (``--prune``): a listing whose cubin only stale NVRTC
    recordings made is named; one a kept recording also makes, or of another cubin, is kept."""
    import hashlib
    (argv, _, cubin), (argv2, cubin2, listing2) = compiled, second
    _, listing = sass.disassemble(cubin)
    sass_memo.record(argv, cubin, listing, folder=tmp_path)
    sass_memo.record(argv2, cubin2, listing2, folder=tmp_path)
    made = hashlib.sha256(cubin).hexdigest()
    assert sass_memo.stale_listings(tmp_path, {made}, set()) == [f"{sass_memo.key(argv, cubin)}.sass.xz"]
    assert sass_memo.stale_listings(tmp_path, {made}, {made}) == []
    assert sass_memo.stale_listings(tmp_path, set(), {made}) == []


def test_verify_runs_the_disassembler_for_a_hit_and_fails_on_a_difference(second, tmp_path, monkeypatch):
    """With ``GEMMLAB_TEST_SASS_VERIFY=1`` the tests' ``disassemble`` compares a recorded listing
    with the disassembler's: an entry whose text was edited (same first line, same code sections)
    fails the test that reads it (without it such an edit is trusted: the files are reviewed like
    tests/data/sass_digests.json)."""
    argv, cubin, listing = second
    edited = listing.replace(" EXIT ", " EXIT  ", 1)
    assert edited != listing
    sass_memo.record(argv, cubin, edited, folder=tmp_path)
    monkeypatch.setattr(sass_memo, "MEMO_DIR", tmp_path)
    monkeypatch.setenv(sass_memo.VERIFY_ENV, "1")
    assert sass_memo.lookup(argv, cubin) == edited  # first line and code sections are right
    with pytest.raises(AssertionError, match="differs from the disassembler's listing"):
        sass.disassemble(cubin)


def test_recording_and_verifying_are_off_unless_asked(monkeypatch):
    """Misses are written into the committed folder only with ``GEMMLAB_TEST_SASS_RECORD=1``; hits
    are checked against the disassembler only with ``GEMMLAB_TEST_SASS_VERIFY=1``."""
    for env, on in ((sass_memo.RECORD_ENV, sass_memo.recording), (sass_memo.VERIFY_ENV, sass_memo.verifying)):
        monkeypatch.delenv(env, raising=False)
        assert not on()
        monkeypatch.setenv(env, "1")
        assert on()


def test_a_missing_committed_entry_fails_under_its_own_toolchain_and_skips_under_another(tmp_path):
    """``sass_memo.missing_entry`` (both memos' committed-entry tests): a folder recorded with this
    very toolchain must hold the entry (the test fails, saying to record again); under another
    toolchain, or with no recordings, the test skips and names what differs."""
    with pytest.raises(pytest.skip.Exception, match="differs in: no recordings"):
        sass_memo.missing_entry(tmp_path, "x.sass.xz", {"tool": 1}, sass_memo.RECORD_ENV, "nvdisasm")
    sass_memo.add_to_manifest(tmp_path, {"tool": 2, "nvrtc": "13.5"})
    with pytest.raises(pytest.skip.Exception, match=r"differs in: tool\)"):
        sass_memo.missing_entry(tmp_path, "x.sass.xz", {"tool": 1, "nvrtc": "13.5"}, sass_memo.RECORD_ENV, "nvdisasm")
    sass_memo.add_to_manifest(tmp_path, {"tool": 1, "nvrtc": "13.5"})
    with pytest.raises(AssertionError, match="record it again"):
        sass_memo.missing_entry(tmp_path, "x.sass.xz", {"tool": 1, "nvrtc": "13.5"}, sass_memo.RECORD_ENV, "nvdisasm")
