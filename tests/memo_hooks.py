"""The test processes' replays of NVRTC's and the disassembler's outputs (tests/nvrtc_memo.py,
tests/sass_memo.py), installed by tests/conftest.py in each test process and by
tests/sitecustomize.py in the point workers those processes start (gemmlab.run.isolation: a worker
is a fresh interpreter whose ``sys.path`` is its parent's, tests/ included). Not a test module;
it imports no pytest (a worker never does)."""

from __future__ import annotations

import os
from pathlib import Path

#: folder of the session's disassembly memo, shared by the session's processes (:func:`memoize_disassembly`)
SASS_MEMO_ENV = "GEMMLAB_TEST_SASS_MEMO"


def memoize_disassembly() -> None:
    """``gemmlab.gpu.sass.disassemble`` memoized for the test session: nvdisasm's listing is a
    function of the cubin's bytes and the disassembler binary only, and the tests compile the
    same kernel again and again outside the disk cache (each cache test has its own cache
    folder; ``compile_kernel(persistent=False)``), in both xdist workers, at about 0.3-0.5 CPU s
    a run. In this process, and as JSON files in the folder ``$GEMMLAB_TEST_SASS_MEMO`` that the
    session's test processes share (written to a temporary name, then renamed; an unreadable file
    is a miss), keyed by the disassembler found (:func:`~gemmlab.gpu.sass.find_disassembler`), its
    :func:`~gemmlab.gpu.sass.tool_id` and the cubin's SHA-256. Before the disassembler runs, the
    listing recorded in tests/data/sass_memo is read (tests/sass_memo.py: keyed by the bytes of
    the cubin, of the disassembler binary found and of ``gemmlab/gpu/sass.py``, so a patched
    ``tool_id`` alone still reads it) and summarized by :func:`gemmlab.gpu.sass.summarize`, as a
    fresh listing is; with ``GEMMLAB_TEST_SASS_VERIFY=1`` the disassembler runs as well and the
    test fails where they differ; with ``GEMMLAB_TEST_SASS_RECORD=1`` a miss is recorded there. A
    test that needs the disassembler itself calls ``sass.disassemble.__wrapped__`` (the
    unmemoized function) or patches ``find_disassembler`` to another binary; one that patches
    ``disassemble`` replaces the memo. Each hit is a copy; a failed disassembly is never
    memoized."""
    import copy
    import hashlib
    import json

    import sass_memo
    from gemmlab.gpu import sass
    real = sass.disassemble
    if getattr(real, "memoized", False):
        return
    seen: dict = {}
    folder = Path(os.environ[SASS_MEMO_ENV]) if os.environ.get(SASS_MEMO_ENV) else None

    def shared(name: str):
        try:
            entry = json.loads((folder / name).read_text())
            return entry["summary"], entry["text"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def share(name: str, summary: dict, text: str) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"summary": summary, "text": text}))
            os.replace(tmp, folder / name)
        except OSError:
            pass

    def disassemble(cubin: bytes):
        argv, described = sass.find_disassembler()
        if argv is None:
            return real(cubin)
        key = (tuple(argv), sass.tool_id(), hashlib.sha256(cubin).hexdigest())
        if key not in seen:
            name = hashlib.sha256(repr(key).encode()).hexdigest() + ".json"
            found = shared(name) if folder else None
            if found is None:
                text = sass_memo.lookup(argv, cubin)
                if text is not None:  # recorded: gemmlab's analysis of the disassembler's own listing
                    found = sass.summarize(text, described), text
                    if sass_memo.verifying():
                        fresh = real(cubin)
                        assert fresh == found, (f"tests/data/sass_memo/{sass_memo.key(argv, cubin)}.sass.xz differs "
                                                "from the disassembler's listing of its cubin: record it again")
            if found is None:
                summary, text = real(cubin)
                if summary.get("error"):
                    return summary, text
                if folder:
                    share(name, summary, text)
                if sass_memo.recording():
                    sass_memo.record(argv, cubin, text)
                found = summary, text
            seen[key] = found
        summary, text = seen[key]
        return copy.deepcopy(summary), text

    disassemble.memoized = True
    disassemble.__wrapped__ = real  # functools' convention: the unmemoized function
    disassemble.__doc__ = real.__doc__
    sass.disassemble = disassemble


def memoize_nvrtc() -> None:
    """``gemmlab.gpu.compile.run_nvrtc`` (the one NVRTC call) reads the compilations recorded in
    tests/data/nvrtc_memo (tests/nvrtc_memo.py: keyed by the source, the headers it includes, the
    options and the flags cuda.core makes of them, the name expressions, the NVRTC library's bytes
    and ``run_nvrtc``'s code; no key, so NVRTC, where those cannot be told) before it runs NVRTC:
    the suite's ~100 distinct kernel instances cost ~30 CPU s to compile. A hit is
    cuda.core's ``ObjectCode`` of the recorded cubin with the recorded symbols, and the recorded
    log; everything after NVRTC runs on it as on a fresh compilation. With
    ``GEMMLAB_TEST_NVRTC_VERIFY=1`` NVRTC runs as well and the test fails where they differ; with
    ``GEMMLAB_TEST_NVRTC_RECORD=1`` a miss is recorded there. Where cuda.core's ``Program`` is
    patched (a test emulating NVRTC) the patch runs, never a recording. A test that needs NVRTC
    itself calls ``compile.run_nvrtc.__wrapped__``."""
    import cuda.core
    import nvrtc_memo
    from gemmlab.gpu import compile as nvrtc
    real = nvrtc.run_nvrtc
    if getattr(real, "memoized", False):
        return
    real_program = cuda.core.Program

    def run_nvrtc(source_path, source, options, include_dirs, names):
        if cuda.core.Program is not real_program:
            return real(source_path, source, options, include_dirs, names)
        found = nvrtc_memo.inputs(source_path, source, options, include_dirs, names)
        hit = nvrtc_memo.lookup(found)
        if hit is None:
            code, log = real(source_path, source, options, include_dirs, names)
            if nvrtc_memo.recording() and not nvrtc_memo.local(source_path, include_dirs, bytes(code.code), log):
                nvrtc_memo.record(found, bytes(code.code), nvrtc_memo.symbols_of(code), log)
            return code, log
        cubin, symbols, log = hit
        if nvrtc_memo.verifying():
            code, fresh = real(source_path, source, options, include_dirs, names)
            assert ((bytes(code.code), nvrtc_memo.symbols_of(code), nvrtc_memo.timeless(fresh))
                    == (cubin, symbols, nvrtc_memo.timeless(log))), (
                f"tests/data/nvrtc_memo/{nvrtc_memo.name_of(found)}.nvrtc.xz differs from what NVRTC returns "
                f"for {names} of {source_path}: record it again")
        from cuda.core import ObjectCode
        code = ObjectCode.from_cubin(cubin, name=Path(source_path).name,
                                     symbol_mapping={n: v.encode() for n, v in symbols.items()})
        return code, log

    run_nvrtc.memoized = True
    run_nvrtc.__wrapped__ = real  # functools' convention: the unmemoized function
    run_nvrtc.__doc__ = real.__doc__
    nvrtc.run_nvrtc = run_nvrtc
