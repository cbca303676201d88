"""Safety nets around a kernel's matrices: guard bands (canaries before and after A, B and C),
input immutability and repeat stability.

Each matrix lives in the middle of a larger allocation; ``GUARD_BYTES`` on each side hold the
canary word 0x7FA11CE5 (a float32 signalling NaN: a kernel that reads it produces NaN, which
verification catches). After the correctness launch and again after timing, both bands are read
back; any changed word is reported as an out-of-bounds write with its element offset relative to
the matrix start (negative: before it; >= size: after it), even when the result is right.
Method: the classic "red zone" of memory debuggers (e.g. AddressSanitizer), applied on device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CANARY = 0x7FA11CE5
GUARD_BYTES = 1 << 20  # 1 MiB each side: covers a missing store mask on tiles up to 256 rows x 1024 cols


@dataclass
class GuardedMatrix:
    """A matrix of ``shape`` (as stored, row-major) and element type ``dtype`` (float32 unless
    given: bf16/fp16 inputs are 2 bytes) on the device with canary bands; ``address`` is the
    first element (pass it to kernels; 256-byte aligned), ``base`` the allocation start."""

    name: str
    shape: tuple[int, int]
    buffer: object
    base: int
    dtype: np.dtype = np.dtype(np.float32)

    @property
    def address(self) -> int:
        return self.base + GUARD_BYTES

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.dtype.itemsize


def allocate(gpu, name: str, shape: tuple[int, int], host: np.ndarray | None = None,
             dtype: np.dtype | None = None) -> GuardedMatrix:
    """Allocate ``shape`` elements of ``dtype`` (default: ``host``'s dtype, else float32) plus
    both bands, write the canaries, and upload ``host`` (if given) into the middle."""
    dtype = np.dtype(dtype if dtype is not None else host.dtype if host is not None else np.float32)
    count = shape[0] * shape[1]
    data_bytes = -(-count * dtype.itemsize // 4) * 4  # whole words, so the canary fill covers every byte
    buffer = gpu.allocate(data_bytes + 2 * GUARD_BYTES)
    g = GuardedMatrix(name=name, shape=shape, buffer=buffer, base=int(buffer.handle), dtype=dtype)
    gpu.fill32(g.base, CANARY, (data_bytes + 2 * GUARD_BYTES) // 4)
    if host is not None:
        gpu.upload(g.address, np.ascontiguousarray(host, dtype=dtype))
    gpu.sync()
    return g


def nan_fill(gpu, g: GuardedMatrix) -> None:
    """Fill the matrix (not its bands) with all-ones words: NaN in float32 and in bfloat16 (two to a
    word), so an element the kernel never writes is caught; whole words, as :func:`allocate` sizes
    the matrix, never past it."""
    gpu.fill32(g.address, 0xFFFFFFFF, -(-g.nbytes // 4))


def read(gpu, g: GuardedMatrix) -> np.ndarray:
    """The matrix contents as an array of ``g.dtype`` and ``g.shape``."""
    return gpu.download(g.address, g.nbytes).view(g.dtype).reshape(g.shape)


def check_bands(gpu, g: GuardedMatrix) -> dict | None:
    """None when both bands hold only canaries, else ``{"matrix", "writes", "first_offsets"}``
    with element offsets relative to the matrix start."""
    words = GUARD_BYTES // 4
    item = g.dtype.itemsize
    tail = -(-g.nbytes // 4) * 4  # the band starts after the last whole word of the matrix
    before = gpu.download(g.base, GUARD_BYTES).view(np.uint32)
    after = gpu.download(g.address + tail, GUARD_BYTES).view(np.uint32)
    offsets = [(int(i) - words) * 4 // item for i in np.nonzero(before != CANARY)[0]]
    offsets += [(tail + 4 * int(i)) // item for i in np.nonzero(after != CANARY)[0]]
    if not offsets:
        return None
    return {"matrix": g.name, "writes": len(offsets), "first_offsets": offsets[:8],
            "message": f"out-of-bounds write: {len(offsets)} word(s) of the guard bands around {g.name} "
                       f"changed, first at element offset {offsets[0]} (matrix has "
                       f"{g.shape[0] * g.shape[1]} elements)"}


def restore_bands(gpu, *matrices: GuardedMatrix) -> None:
    """Write the canary into both bands of each matrix again (after a reported out-of-bounds write),
    so a later check of the same buffers sees only what came after."""
    for g in matrices:
        tail = -(-g.nbytes // 4) * 4
        gpu.fill32(g.base, CANARY, GUARD_BYTES // 4)
        gpu.fill32(g.address + tail, CANARY, GUARD_BYTES // 4)


def release(*matrices: GuardedMatrix) -> None:
    for g in matrices:
        g.buffer.close()
