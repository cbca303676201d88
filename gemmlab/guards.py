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
    """A float32 matrix of ``shape`` on the device with canary bands; ``address`` is the first
    element (pass it to kernels), ``base`` the allocation start."""

    name: str
    shape: tuple[int, int]
    buffer: object
    base: int

    @property
    def address(self) -> int:
        return self.base + GUARD_BYTES

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * 4


def allocate(gpu, name: str, shape: tuple[int, int], host: np.ndarray | None = None) -> GuardedMatrix:
    """Allocate ``shape`` float32 elements plus both bands, write the canaries, and upload ``host``
    (if given) into the middle."""
    count = shape[0] * shape[1]
    buffer = gpu.allocate(count * 4 + 2 * GUARD_BYTES)
    g = GuardedMatrix(name=name, shape=shape, buffer=buffer, base=int(buffer.handle))
    gpu.fill32(g.base, CANARY, (count * 4 + 2 * GUARD_BYTES) // 4)
    if host is not None:
        gpu.upload(g.address, np.ascontiguousarray(host, dtype=np.float32))
    gpu.sync()
    return g


def read(gpu, g: GuardedMatrix) -> np.ndarray:
    """The matrix contents as a float32 array of ``g.shape``."""
    return gpu.download(g.address, g.nbytes).view(np.float32).reshape(g.shape)


def check_bands(gpu, g: GuardedMatrix) -> dict | None:
    """None when both bands hold only canaries, else ``{"matrix", "writes", "first_offsets"}``
    with element offsets relative to the matrix start."""
    words = GUARD_BYTES // 4
    before = gpu.download(g.base, GUARD_BYTES).view(np.uint32)
    after = gpu.download(g.address + g.nbytes, GUARD_BYTES).view(np.uint32)
    offsets = [int(i) - words for i in np.nonzero(before != CANARY)[0]]
    offsets += [int(i) + g.shape[0] * g.shape[1] for i in np.nonzero(after != CANARY)[0]]
    if not offsets:
        return None
    return {"matrix": g.name, "writes": len(offsets), "first_offsets": offsets[:8],
            "message": f"out-of-bounds write: {len(offsets)} word(s) of the guard bands around {g.name} "
                       f"changed, first at element offset {offsets[0]} (matrix has "
                       f"{g.shape[0] * g.shape[1]} elements)"}


def release(*matrices: GuardedMatrix) -> None:
    for g in matrices:
        g.buffer.close()
