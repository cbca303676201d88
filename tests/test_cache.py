"""Persistent on-disk compile cache (gemmlab/gpu/cache.py) and its use by ``compile_kernel`` and
``run_point`` (mode=compile: NVRTC only, no GPU needed).

Contract under test (gemmlab/gpu/cache.py docstring): the key covers every input that can change the
cubin; an entry is ``<key>.cubin`` + ``<key>.json``; a missing, truncated or corrupt entry is a
miss, never a crash; a failed store only costs the cache. ``compile_kernel(persistent=True)``
records ``disk_cache`` as ``miss`` / ``hit`` (``off`` without the disk cache).

The in-process cache is emptied with its public hook (``gemmlab.gpu.compile.clear_cache``) before
each test here and between calls, to act like a fresh process.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from gemmlab.gpu import cache
from gemmlab.gpu import compile as compile_mod
from gemmlab.gpu.compile import CompileOptions, compile_kernel
from gemmlab.paths import KERNELS_DIR
from gemmlab.run.pipeline import run_point

ELF = b"\x7fELF"
NAIVE = "gemm_naive<16, 16>"

KEY_ARGS = dict(source_sha256="a" * 64, flags=["-arch=sm_90", "-std=c++17", "-fmad=true", "-Xptxas=-v"],
                name_expression=NAIVE, arch="90", nvrtc_version="13.5", driver_version="none")
CHANGED = {"source_sha256": "b" * 64,
           "flags": ["-arch=sm_90", "-std=c++17", "-fmad=false", "-Xptxas=-v"],
           "name_expression": "gemm_naive<32, 8>",
           "arch": "80",
           "nvrtc_version": "13.0",
           "driver_version": "13.0"}


# --- make_key --------------------------------------------------------------------------------

def test_make_key_is_stable_and_hex_sha256():
    first = cache.make_key(**KEY_ARGS)
    assert first == cache.make_key(**{k: (list(v) if isinstance(v, list) else v) for k, v in KEY_ARGS.items()})
    assert len(first) == 64 and int(first, 16) >= 0


@pytest.mark.parametrize("part", sorted(CHANGED))
def test_make_key_changes_with_every_part(part):
    base = cache.make_key(**KEY_ARGS)
    changed = cache.make_key(**{**KEY_ARGS, part: CHANGED[part]})
    assert changed != base, f"changing {part} must change the key"


def test_make_key_extra_flag_changes_key():
    assert cache.make_key(**{**KEY_ARGS, "flags": KEY_ARGS["flags"] + ["-use_fast_math"]}) != cache.make_key(**KEY_ARGS)


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path / "env"))
    assert cache.cache_dir(str(tmp_path / "cfg")) == tmp_path / "cfg"
    assert cache.cache_dir(None) == tmp_path / "env"
    monkeypatch.delenv("GEMMLAB_CACHE_DIR")
    assert cache.cache_dir(None) == Path.home() / ".cache" / "gemmlab" / "compile"


# --- store / load ----------------------------------------------------------------------------

CUBIN = ELF + bytes(range(256)) * 4
META = {"lowered_name": "_Z10gemm_naiveILi16ELi16EEvPKfS1_Pfiii", "nvrtc_version": "13.5", "compile_ms": 12.5,
        "resources": {"registers": 32, "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_frame_bytes": 0,
                      "static_shared_bytes": 0}, "log": "ptxas info", "name_expression": NAIVE}


@pytest.fixture
def entry(tmp_path):
    """A stored entry: (folder, key)."""
    folder = tmp_path / "cache"
    key = cache.make_key(**KEY_ARGS)
    cache.store(folder, key, CUBIN, META)
    return folder, key


def test_store_load_round_trip(entry):
    folder, key = entry
    assert (folder / f"{key}.cubin").read_bytes() == CUBIN
    assert sorted(p.name for p in folder.iterdir()) == [f"{key}.cubin", f"{key}.json"]  # no temp files left
    loaded = cache.load(folder, key)
    assert loaded is not None
    cubin, meta = loaded
    assert cubin == CUBIN
    for k, v in META.items():
        assert meta[k] == v
    assert meta["schema"] == cache.SCHEMA and meta["key"] == key
    assert meta["cubin_sha256"] == hashlib.sha256(CUBIN).hexdigest()


def test_load_of_absent_key_is_a_miss(entry, tmp_path):
    folder, key = entry
    assert cache.load(folder, "0" * 64) is None
    assert cache.load(tmp_path / "does-not-exist", key) is None


def _truncate_cubin(folder, key):
    p = folder / f"{key}.cubin"
    p.write_bytes(p.read_bytes()[: len(CUBIN) // 2])


def _flip_cubin_byte(folder, key):
    p = folder / f"{key}.cubin"
    data = bytearray(p.read_bytes())
    data[100] ^= 0xFF
    p.write_bytes(bytes(data))


def _empty_cubin(folder, key):
    (folder / f"{key}.cubin").write_bytes(b"")


def _json_garbage(folder, key):
    (folder / f"{key}.json").write_text("{this is not json")


def _json_binary_garbage(folder, key):
    (folder / f"{key}.json").write_bytes(b"\xff\xfe\x00garbage\x80")


def _json_empty(folder, key):
    (folder / f"{key}.json").write_text("")


def _json_truncated(folder, key):
    p = folder / f"{key}.json"
    p.write_text(p.read_text()[:20])


def _json_not_a_mapping(folder, key):
    (folder / f"{key}.json").write_text("[1, 2, 3]")


def _json_wrong_schema(folder, key):
    p = folder / f"{key}.json"
    meta = json.loads(p.read_text())
    meta["schema"] = "gemmlab.gpu.compile-cache/0"
    p.write_text(json.dumps(meta))


def _json_no_schema(folder, key):
    p = folder / f"{key}.json"
    meta = json.loads(p.read_text())
    del meta["schema"]
    p.write_text(json.dumps(meta))


def _json_wrong_key(folder, key):
    p = folder / f"{key}.json"
    meta = json.loads(p.read_text())
    meta["key"] = "f" * 64
    p.write_text(json.dumps(meta))


def _json_of_another_entry(folder, key):
    other = cache.make_key(**{**KEY_ARGS, "arch": "80"})
    cache.store(folder, other, CUBIN, META)
    shutil.copy(folder / f"{other}.json", folder / f"{key}.json")


def _json_wrong_digest(folder, key):
    p = folder / f"{key}.json"
    meta = json.loads(p.read_text())
    meta["cubin_sha256"] = "0" * 64
    p.write_text(json.dumps(meta))


def _missing_cubin(folder, key):
    (folder / f"{key}.cubin").unlink()


def _missing_json(folder, key):
    (folder / f"{key}.json").unlink()


def _cubin_is_a_directory(folder, key):
    (folder / f"{key}.cubin").unlink()
    (folder / f"{key}.cubin").mkdir()


CORRUPTIONS = [_truncate_cubin, _flip_cubin_byte, _empty_cubin, _json_garbage, _json_binary_garbage, _json_empty,
               _json_truncated, _json_not_a_mapping, _json_wrong_schema, _json_no_schema, _json_wrong_key,
               _json_of_another_entry, _json_wrong_digest, _missing_cubin, _missing_json, _cubin_is_a_directory]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.lstrip("_"))
def test_corrupt_entry_is_a_miss_not_a_crash(entry, corrupt):
    folder, key = entry
    assert cache.load(folder, key) is not None
    corrupt(folder, key)
    assert cache.load(folder, key) is None


def test_store_into_unwritable_place_does_not_raise(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    key = cache.make_key(**KEY_ARGS)
    cache.store(blocker, key, CUBIN, META)  # the folder is a file
    cache.store(blocker / "sub", key, CUBIN, META)  # the folder's parent is a file
    assert blocker.read_text() == "not a folder"
    assert cache.load(blocker, key) is None


def test_store_where_entry_name_is_a_directory_does_not_raise(tmp_path):
    folder = tmp_path / "cache"
    key = cache.make_key(**KEY_ARGS)
    (folder / f"{key}.cubin").mkdir(parents=True)  # os.replace onto a directory fails
    cache.store(folder, key, CUBIN, META)
    assert cache.load(folder, key) is None


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores directory permissions")
def test_store_into_read_only_dir_does_not_raise(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        key = cache.make_key(**KEY_ARGS)
        cache.store(folder, key, CUBIN, META)
        assert cache.load(folder, key) is None
    finally:
        folder.chmod(0o700)


# --- compile_kernel(persistent=True) -----------------------------------------------------------

@pytest.fixture
def fresh():
    """An empty in-process compile cache (:func:`gemmlab.gpu.compile.clear_cache`, emptied again after
    the test); call it to empty it once more, as a new process would start."""
    compile_mod.clear_cache()
    yield compile_mod.clear_cache
    compile_mod.clear_cache()


@pytest.fixture
def source(tmp_path):
    """A private copy of the naive kernel source (its own SHA-256 key space)."""
    path = tmp_path / "naive.cu"
    shutil.copy(KERNELS_DIR / "naive.cu", path)
    return path


def _persist(src, folder, name=NAIVE, arch="90"):
    return compile_kernel(src, name, CompileOptions(arch=arch), persistent=True, cache_folder=str(folder))


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.cubin"))


def test_compile_kernel_miss_then_hit(fresh, source, tmp_path):
    folder = tmp_path / "cc"
    first = _persist(source, folder)
    assert first.disk_cache == "miss" and not first.cache_hit
    assert first.original_compile_ms is None
    assert first.resources is not None and first.resources.registers > 0
    assert len(_entries(folder)) == 1
    assert first.record()["disk_cache"] == "miss"

    fresh()  # a new process: only the disk knows the cubin
    second = _persist(source, folder)
    assert second.disk_cache == "hit"
    assert not second.cache_hit
    assert second.resources == first.resources
    assert second.lowered_name == first.lowered_name
    assert second.nvrtc_version == first.nvrtc_version
    assert second.original_compile_ms == pytest.approx(first.compile_ms)
    assert second.object_code is not first.object_code
    code = bytes(second.object_code.code)
    assert code[:4] == ELF
    assert code == bytes(first.object_code.code)
    rec = second.record()
    assert rec["disk_cache"] == "hit" and rec["original_compile_ms"] == pytest.approx(first.compile_ms)
    assert rec["resources"] == first.record()["resources"]
    assert len(_entries(folder)) == 1  # a hit writes nothing new


def test_hit_reuses_the_stored_sass_of_the_same_disassembler(fresh, source, tmp_path, monkeypatch):
    """A disk hit gives the miss's SASS summary and text without running the disassembler again."""
    from gemmlab.gpu import sass
    folder = tmp_path / "cc"
    first = _persist(source, folder)
    assert first.sass["error"] is None and first.sass["histogram"]["total"] > 0 and first.sass_text
    (meta_path,) = folder.glob("*.json")
    assert json.loads(meta_path.read_text())["sass"]["text"] == first.sass_text

    def no_disassembler(cubin):
        raise AssertionError("disassembled again")

    monkeypatch.setattr(sass, "disassemble", no_disassembler)
    fresh()
    second = _persist(source, folder)
    assert second.disk_cache == "hit"
    assert second.sass == first.sass and second.sass_text == first.sass_text
    assert second.record()["sass"] == first.record()["sass"]


def test_hit_disassembles_again_for_another_disassembler(fresh, source, tmp_path, monkeypatch):
    from gemmlab.gpu import sass
    folder = tmp_path / "cc"
    first = _persist(source, folder)
    calls = []
    real = sass.disassemble
    monkeypatch.setattr(sass, "disassemble", lambda cubin: calls.append(1) or real(cubin))
    monkeypatch.setattr(sass, "tool_id", lambda: "nvdisasm (another)|1|2")
    fresh()
    second = _persist(source, folder)
    assert second.disk_cache == "hit" and calls == [1]
    assert second.sass == first.sass  # the same binary in fact: the same summary


def _no_disassembler(cubin):
    raise AssertionError("disassembled again")


def test_a_new_key_for_the_same_cubin_reads_the_folders_sass(fresh, source, tmp_path, monkeypatch):
    """A miss whose cubin bytes the folder has disassembled before (here: a comment added to the
    source, a new key, the same code) takes that disassembly from ``sass/<cubin SHA-256>.json``
    without running the disassembler; so does a hit whose entry holds no SASS."""
    from gemmlab.gpu import sass
    folder = tmp_path / "cc"
    first = _persist(source, folder)
    code = bytes(first.object_code.code)
    stored = json.loads((folder / "sass" / f"{hashlib.sha256(code).hexdigest()}.json").read_text())
    assert stored["text"] == first.sass_text and stored["summary"] == first.sass and stored["tool"] == sass.tool_id()
    monkeypatch.setattr(sass, "disassemble", _no_disassembler)
    fresh()
    source.write_text(source.read_text() + "\n// a comment: a new key, the same cubin\n")
    again = _persist(source, folder)
    assert again.disk_cache == "miss" and len(_entries(folder)) == 2
    assert bytes(again.object_code.code) == code  # the premise: NVRTC ignores the comment
    assert again.sass == first.sass and again.sass_text == first.sass_text
    for meta_path in folder.glob("*.json"):  # entries made before the folder kept SASS by cubin
        meta = json.loads(meta_path.read_text())
        meta_path.write_text(json.dumps(dict(meta, sass=None)))
    fresh()
    hit = _persist(source, folder)
    assert hit.disk_cache == "hit" and hit.sass == first.sass and hit.sass_text == first.sass_text


@pytest.mark.parametrize("damage", ["another_disassembler", "garbage", "not_a_mapping"])
def test_the_folders_sass_of_another_disassembler_or_damaged_is_not_used(fresh, source, tmp_path, monkeypatch,
                                                                         damage):
    """The folder's SASS of a cubin made by another disassembler binary, or damaged, is no
    disassembly: the disassembler runs (once) and its SASS replaces the file."""
    from gemmlab.gpu import sass
    folder = tmp_path / "cc"
    first = _persist(source, folder)
    path = folder / "sass" / f"{hashlib.sha256(bytes(first.object_code.code)).hexdigest()}.json"
    if damage == "another_disassembler":
        path.write_text(json.dumps(dict(json.loads(path.read_text()), tool="nvdisasm (another)|1|2")))
    else:
        path.write_text("{not json" if damage == "garbage" else "[1, 2]")
    calls = []
    real = sass.disassemble
    monkeypatch.setattr(sass, "disassemble", lambda cubin: calls.append(1) or real(cubin))
    fresh()
    source.write_text(source.read_text() + "\n// a new key, the same cubin\n")
    again = _persist(source, folder)
    assert again.disk_cache == "miss" and calls == [1]
    assert again.sass == first.sass and again.sass_text == first.sass_text
    assert json.loads(path.read_text())["tool"] == sass.tool_id()


def test_compile_kernel_without_persistent_is_off(fresh, source, tmp_path):
    compiled = compile_kernel(source, NAIVE, CompileOptions(arch="90"))
    assert compiled.disk_cache == "off" and compiled.original_compile_ms is None


@pytest.mark.parametrize("change", ["arch", "name", "source"])
def test_compile_kernel_changed_input_misses(fresh, source, tmp_path, change, sass_not_read):
    """A changed target, instance or source is a new key: a miss, a second entry, both kept. The
    SASS is never read here (``sass_not_read``: no nvdisasm run for the sm_80 and ``<32, 8>``
    cubins, about 0.5 CPU s; the disk cache keeps no failed disassembly, so the entries are as
    without it)."""
    folder = tmp_path / "cc"
    assert _persist(source, folder).disk_cache == "miss"
    fresh()
    assert _persist(source, folder).disk_cache == "hit"  # the unchanged call hits
    fresh()
    if change == "arch":
        again = _persist(source, folder, arch="80")
        assert "-arch=sm_80" in again.options.flags()
    elif change == "name":
        again = _persist(source, folder, name="gemm_naive<32, 8>")
    else:
        source.write_text(source.read_text() + "\n// edited: the key must change\n")
        again = _persist(source, folder)
    assert again.disk_cache == "miss"
    assert bytes(again.object_code.code)[:4] == ELF
    assert len(_entries(folder)) == 2
    fresh()
    if change == "arch":
        assert _persist(source, folder, arch="80").disk_cache == "hit"
        fresh()
        assert _persist(source, folder, arch="90").disk_cache == "hit"  # both targets kept


@pytest.mark.parametrize("damage", ["garbage_cubin", "truncated_cubin", "garbage_json", "missing_json"])
def test_compile_kernel_corrupt_entry_misses_and_is_rewritten(fresh, source, tmp_path, damage):
    folder = tmp_path / "cc"
    first = _persist(source, folder)
    [name] = _entries(folder)
    key = name[: -len(".cubin")]
    cubin = folder / f"{key}.cubin"
    if damage == "garbage_cubin":
        cubin.write_bytes(b"this is not a cubin" * 10)
    elif damage == "truncated_cubin":
        cubin.write_bytes(cubin.read_bytes()[:64])
    elif damage == "garbage_json":
        (folder / f"{key}.json").write_text("{{{")
    else:
        (folder / f"{key}.json").unlink()
    assert cache.load(folder, key) is None

    fresh()
    again = _persist(source, folder)
    assert again.disk_cache == "miss"
    assert bytes(again.object_code.code)[:4] == ELF
    loaded = cache.load(folder, key)  # rewritten, valid
    assert loaded is not None
    assert loaded[0][:4] == ELF and loaded[0] == bytes(first.object_code.code)
    assert loaded[1]["lowered_name"] == first.lowered_name

    fresh()
    assert _persist(source, folder).disk_cache == "hit"


def test_compile_kernel_unwritable_cache_still_compiles(fresh, source, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    compiled = _persist(source, blocker)
    assert bytes(compiled.object_code.code)[:4] == ELF
    assert compiled.disk_cache == "miss"


def test_compile_kernel_entry_with_incomplete_metadata_is_a_miss(fresh, source, tmp_path):
    folder = tmp_path / "cc"
    sha = hashlib.sha256(source.read_text(encoding="utf-8").encode()).hexdigest()
    opts = CompileOptions(arch="90")
    key = cache.make_key(sha, opts.flags(), NAIVE, "90", compile_mod.nvrtc_version(), "none")
    cache.store(folder, key, ELF + b"stale", {})  # schema, key and digest are right; nothing else
    compiled = _persist(source, folder)
    assert compiled.disk_cache == "miss"
    assert bytes(compiled.object_code.code)[:4] == ELF


def test_persistent_compile_after_in_process_compile_writes_the_entry(fresh, source, tmp_path):
    folder = tmp_path / "cc"
    compile_kernel(source, NAIVE, CompileOptions(arch="90"))  # persistent=False
    again = _persist(source, folder)
    assert len(_entries(folder)) == 1
    assert again.disk_cache in ("miss", "hit")


# --- run_point in mode=compile -----------------------------------------------------------------

def _cfg(cache_dir: Path | None, enabled: bool = True, kernel: str = "naive") -> dict:
    return {"kernel": {"name": kernel}, "shape": [8, 8, 8], "mode": "compile",
            "cache": {"enabled": enabled, "dir": str(cache_dir) if cache_dir else None}}


def test_run_point_records_disk_cache_miss_hit_off(fresh, tmp_path):
    folder = tmp_path / "cc"
    first = run_point(_cfg(folder), tmp_path / "p0")
    assert first["status"] == "compiled", first["error"]
    assert first["compile"]["disk_cache"] == "miss"
    assert first["compile"]["original_compile_ms"] is None
    assert len(_entries(folder)) == 1
    on_disk = json.loads((tmp_path / "p0" / "result.json").read_text())
    assert on_disk["compile"]["disk_cache"] == "miss"

    fresh()
    second = run_point(_cfg(folder), tmp_path / "p1")
    assert second["status"] == "compiled", second["error"]
    assert second["compile"]["disk_cache"] == "hit"
    assert second["compile"]["cache_hit_in_process"] is False
    assert second["compile"]["original_compile_ms"] == pytest.approx(first["compile"]["compile_ms"], abs=1e-3)
    assert second["compile"]["resources"] == first["compile"]["resources"]
    assert second["compile"]["lowered_name"] == first["compile"]["lowered_name"]

    fresh()
    third = run_point(_cfg(folder, enabled=False), tmp_path / "p2")
    assert third["status"] == "compiled", third["error"]
    assert third["compile"]["disk_cache"] == "off"
    assert len(_entries(folder)) == 1


def test_run_point_says_when_the_cache_folder_is_unusable(fresh, tmp_path):
    """A cache folder that is a file: every compile would miss for ever; the record and the summary
    say why (new-user finding 8), the run itself goes on."""
    from gemmlab.stages.record import summary
    afile = tmp_path / "afile"
    afile.write_text("x")
    rec = run_point({"kernel": {"name": "naive"}, "shape": [16, 16, 16], "mode": "compile",
                     "cache": {"enabled": True, "dir": str(afile)}}, tmp_path / "p")
    assert rec["status"] == "compiled" and rec["compile"]["disk_cache"] == "miss"
    assert rec["compile"]["disk_cache_error"] == f"{afile} is not a folder"
    assert f"disk cache not usable: {afile} is not a folder" in summary(rec)
    ok = run_point({"kernel": {"name": "naive"}, "shape": [16, 16, 16], "mode": "compile",
                    "cache": {"enabled": True, "dir": str(tmp_path / "c")}}, tmp_path / "q")
    assert ok["compile"]["disk_cache_error"] is None


def test_run_point_cache_dir_defaults_to_env(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path / "from-env"))
    rec = run_point(_cfg(None), tmp_path / "p0")
    assert rec["status"] == "compiled", rec["error"]
    assert rec["compile"]["disk_cache"] == "miss"
    assert len(_entries(tmp_path / "from-env")) == 1
    fresh()
    assert run_point(_cfg(None), tmp_path / "p1")["compile"]["disk_cache"] == "hit"


def test_run_point_disabled_cache_writes_nothing(fresh, tmp_path):
    folder = tmp_path / "cc"
    rec = run_point(_cfg(folder, enabled=False), tmp_path / "p0")
    assert rec["status"] == "compiled", rec["error"]
    assert rec["compile"]["disk_cache"] == "off"
    assert not folder.exists()


def test_run_point_rejects_bad_cache_config(fresh, tmp_path):
    rec = run_point({**_cfg(tmp_path / "cc"), "cache": {"enabled": "yes", "dir": None}}, tmp_path / "p0")
    assert rec["status"] == "invalid" and rec["error"].startswith("cache.enabled:")
    rec = run_point({**_cfg(tmp_path / "cc"), "cache": {"enabled": True, "dir": 5}}, tmp_path / "p1")
    assert rec["status"] == "invalid" and rec["error"].startswith("cache.dir:")


def test_run_point_disabled_cache_records_off_after_enabled_in_same_process(fresh, tmp_path):
    folder = tmp_path / "cc"
    assert run_point(_cfg(folder), tmp_path / "p0")["compile"]["disk_cache"] == "miss"
    rec = run_point(_cfg(folder, enabled=False), tmp_path / "p1")  # same process: no clear
    assert rec["compile"]["disk_cache"] == "off"


# --- a damaged entry's metadata (moved from test_followups.py) --------------------------------

def test_cache_entry_with_garbage_resources_is_a_miss(tmp_path):
    from gemmlab.gpu import cache, compile as compile_stage
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.paths import KERNELS_DIR
    folder = tmp_path / "cache"
    compile_stage.clear_cache()
    first = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(folder))
    (meta_path,) = folder.glob("*.json")
    meta = json.loads(meta_path.read_text())
    meta["resources"] = "garbage"
    meta_path.write_text(json.dumps(meta))
    assert cache.load(folder, meta_path.stem) is None
    compile_stage.clear_cache()
    meta["resources"] = {"nonsense": 1}
    meta_path.write_text(json.dumps(meta))
    again = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(folder))
    assert first.disk_cache == "miss" and again.disk_cache == "miss" and again.resources is not None
