"""numpy emulations of kernels/device_check.cu for the host-memory fake GPU (tests/fakegpu.py; not a
test module): each ``gemmlab_dc_*`` launch runs the twin below on the fake's memory, from the same
arguments the real launch gets (device addresses as uint64, sizes, the rule's constants), with the
kernel's own semantics (the generator of gemmlab.stages.device_check, float64 sums, the per (row,
64-column tile) statistics of gemmlab_dc_sampled). So the host side of the device check (index
arrays, stream keys, scratch buffers, the statistics' reduction, Freivalds' vectors, the verdict) runs
on the CPU exactly as on a GPU; the CUDA itself only runs on one (tests/test_gpu_device_check.py).
"""

from __future__ import annotations

import re

import numpy as np

from gemmlab.stages import device_check as dc
from gemmlab.stages import verify as verify_stage

_NAME = re.compile(r"^gemmlab_dc_(\w+)<([\d, ]*)>$")


def _dtype(code: int) -> np.dtype:
    if code == 1:
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float32 if code == 0 else np.float16)


def _array(gpu, address, dtype, count: int) -> np.ndarray:
    """The live elements [address, address + count) of ``dtype`` on the fake."""
    dtype = np.dtype(dtype)
    return gpu.view(int(address), count * dtype.itemsize).view(dtype)


def _logical(gpu, address, code: int, rows: int, cols: int, layout: int, rounding: int) -> np.ndarray:
    """The logical float64 matrix (rows x cols) stored at ``address`` (layout 1: as its transpose),
    TF32-rounded by ``rounding`` (the ROUND template parameter)."""
    stored = _array(gpu, address, _dtype(code), rows * cols).astype(np.float32)
    x = stored.reshape(rows, cols) if layout == 0 else stored.reshape(cols, rows).T
    name = {v: k for k, v in dc.ROUND_CODES.items()}[rounding]
    return verify_stage.round_tf32(np.ascontiguousarray(x), name).astype(np.float64)


def fill(gpu, args, code, dist):
    out, rows, cols, transposed, key = (int(a) for a in args)
    dist_name = {v: k for k, v in dc.DIST_CODES.items()}[dist]
    st = dc.to_storage(dc.draw_keyed(rows, cols, key, dist_name), _dtype(code))
    _array(gpu, out, st.dtype, rows * cols)[:] = (st.T if transposed else st).reshape(-1)


def scale(gpu, args, code):
    data, n, factor = int(args[0]), int(args[1]), np.float32(args[2])
    x = _array(gpu, data, _dtype(code), n)
    x[:] = (x.astype(np.float32) * factor).astype(x.dtype)


def copy(gpu, args):
    src, dst, words = (int(a) for a in args)
    _array(gpu, dst, np.uint32, words)[:] = _array(gpu, src, np.uint32, words)


def diff(gpu, args, size):
    a, b, n, count = (int(x) for x in args)
    word = np.uint32 if size == 4 else np.uint16
    _array(gpu, count, np.uint64, 1)[0] += np.uint64((_array(gpu, a, word, n) != _array(gpu, b, word, n)).sum())


def nan(gpu, args):
    c, n, count = (int(x) for x in args)
    _array(gpu, count, np.uint64, 1)[0] += np.uint64(np.isnan(_array(gpu, c, np.float32, n)).sum())


def matvec(gpu, args, code, rounding, layout):
    x, rows, cols, v, nv, abs_mask, partial = (int(a) for a in args)
    X = _logical(gpu, x, code, rows, cols, layout, rounding)
    V = _array(gpu, v, np.float64, nv * cols).reshape(nv, cols)
    chunks = -(-cols // dc.MV_CHUNK)
    out = _array(gpu, partial, np.float64, chunks * nv * rows).reshape(chunks, nv, rows)
    for ch in range(chunks):
        c0, c1 = ch * dc.MV_CHUNK, min(cols, (ch + 1) * dc.MV_CHUNK)
        for t in range(nv):
            g = np.abs(X[:, c0:c1]) if (abs_mask >> t) & 1 else X[:, c0:c1]
            out[ch, t] = g @ V[t, c0:c1]


def sum_chunks(gpu, args):
    partial, chunks, n, out = (int(a) for a in args)
    parts = _array(gpu, partial, np.float64, chunks * n).reshape(chunks, n)
    total = np.zeros(n)
    for ch in range(chunks):  # in chunk order, as the kernel
        total += parts[ch]
    _array(gpu, out, np.float64, n)[:] = total


def sampled(gpu, args, code, rounding, la, lb):
    (a, b, c, rows_p, cols_p, R, Cn, M, N, K, rule) = (int(x) for x in args[:11])
    coef_abs, coef_ref, atol, rtol = (float(x) for x in args[11:15])
    s_count, s_first, s_got, s_exp, s_ratio, s_abs, s_rel = (int(x) for x in args[15:22])
    rows = _array(gpu, rows_p, np.int32, R).astype(np.int64) if rows_p else np.arange(R)
    cols = _array(gpu, cols_p, np.int32, Cn).astype(np.int64) if cols_p else np.arange(Cn)
    A = _logical(gpu, a, code, M, K, la, rounding)[rows]
    B = _logical(gpu, b, code, K, N, lb, rounding)[:, cols]
    ref, mag = A @ B, np.abs(A) @ np.abs(B)
    cv = _array(gpu, c, np.float32, M * N).reshape(M, N)[np.ix_(rows, cols)]
    c64 = cv.astype(np.float64)
    finite = np.isfinite(c64)
    err = np.abs(c64 - ref)
    tol = (np.zeros_like(ref) if rule == 2 else atol + rtol * np.abs(ref) if rule == 1
           else coef_abs * mag + coef_ref * np.abs(ref) + 1e-30)
    bad = ~finite | (err > tol)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(~finite, np.inf, np.where(err == 0, 0.0, err / tol))
        rel = np.where(finite & (ref != 0), err / np.abs(ref), 0.0)
    tiles = -(-Cn // dc.TILE)
    out = {name: _array(gpu, p, dt, R * tiles).reshape(R, tiles) for name, p, dt in (
        ("count", s_count, np.int32), ("first", s_first, np.int32), ("got", s_got, np.float32),
        ("expected", s_exp, np.float64), ("ratio", s_ratio, np.float64), ("abserr", s_abs, np.float64),
        ("relerr", s_rel, np.float64))}
    for t in range(tiles):
        sl = slice(t * dc.TILE, min(Cn, (t + 1) * dc.TILE))
        b_t = bad[:, sl]
        out["count"][:, t] = b_t.sum(axis=1)
        out["ratio"][:, t] = ratio[:, sl].max(axis=1)
        out["abserr"][:, t] = np.where(finite[:, sl], err[:, sl], -1.0).max(axis=1)
        out["relerr"][:, t] = rel[:, sl].max(axis=1)
        j = np.argmax(b_t, axis=1)
        has = b_t.any(axis=1)
        idx = np.arange(R)
        out["first"][:, t] = np.where(has, j + t * dc.TILE, -1)
        out["got"][:, t] = np.where(has, cv[idx, j + t * dc.TILE], 0.0)
        out["expected"][:, t] = np.where(has, ref[idx, j + t * dc.TILE], 0.0)


KERNELS = {"fill": fill, "scale": scale, "copy": copy, "diff": diff, "nan": nan, "matvec": matvec,
           "sum": sum_chunks, "sampled": sampled}


def emulation(name: str):
    """The fake's launch function ``(gpu, args)`` for a device-check kernel instance ``name`` (e.g.
    ``gemmlab_dc_fill<1, 0>``), or None for any other kernel."""
    match = _NAME.match(name)
    if not match:
        return None
    kernel = KERNELS[match.group(1)]
    params = [int(p) for p in match.group(2).split(",") if p.strip()]
    if kernel in (copy, nan, sum_chunks):
        params = []  # the unused template parameter
    return lambda gpu, args: kernel(gpu, args, *params)
