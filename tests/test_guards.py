"""gemmlab.gpu.guards: guard-banded matrices on a fake GPU (host memory at raw addresses), the canary
check before and after each matrix, and read-back."""

from __future__ import annotations

import numpy as np
import pytest

from fakegpu import HostGpu
from gemmlab.gpu import guards
from gemmlab.gpu.guards import CANARY, GUARD_BYTES, GuardedMatrix

WORDS = GUARD_BYTES // 4


class CanaryGpu:
    """``download`` returns canary words, except one word changed at ``bad`` (an absolute address)."""

    def __init__(self, bad: int | None = None):
        self.bad = bad
        self.calls = []

    def download(self, address, nbytes):
        self.calls.append((address, nbytes))
        words = np.full(nbytes // 4, CANARY, dtype=np.uint32)
        if self.bad is not None and address <= self.bad < address + nbytes:
            words[(self.bad - address) // 4] = 0x3F800000  # 1.0f written over the canary
        return words.view(np.uint8)


def matrix(shape=(3, 5), base=0x10000000) -> GuardedMatrix:
    return GuardedMatrix(name="C", shape=shape, buffer=None, base=base)


def test_layout():
    g = matrix()
    assert g.address == g.base + GUARD_BYTES
    assert g.nbytes == 3 * 5 * 4
    assert CANARY == 0x7FA11CE5
    assert np.isnan(np.array([CANARY], np.uint32).view(np.float32)[0])  # a kernel reading it gets NaN


def test_intact_bands():
    g = matrix()
    gpu = CanaryGpu()
    assert guards.check_bands(gpu, g) is None
    assert gpu.calls == [(g.base, GUARD_BYTES), (g.address + g.nbytes, GUARD_BYTES)]  # both bands, whole


@pytest.mark.parametrize("word_before, offset", [(1, -1), (4, -4), (WORDS, -WORDS)])
def test_write_before_matrix(word_before, offset):
    g = matrix()
    hit = guards.check_bands(CanaryGpu(bad=g.address - 4 * word_before), g)
    assert hit is not None
    assert hit["matrix"] == "C" and hit["writes"] == 1
    assert hit["first_offsets"] == [offset]
    assert hit["first_offsets"][0] < 0
    assert "out-of-bounds" in hit["message"] and f"offset {offset}" in hit["message"]
    assert "15 elements" in hit["message"]


@pytest.mark.parametrize("word_after, offset", [(0, 15), (1, 16), (WORDS - 1, 15 + WORDS - 1)])
def test_write_after_matrix(word_after, offset):
    g = matrix()
    hit = guards.check_bands(CanaryGpu(bad=g.address + g.nbytes + 4 * word_after), g)
    assert hit["first_offsets"] == [offset]
    assert hit["first_offsets"][0] >= 3 * 5  # >= size: past the end
    assert "out-of-bounds" in hit["message"] and "C" in hit["message"]


def test_allocate_writes_canaries_and_uploads():
    gpu = HostGpu()
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = guards.allocate(gpu, "A", (3, 4), host)
    assert g.base == int(g.buffer.handle)
    assert gpu.memory[g.base].size == 12 * 4 + 2 * GUARD_BYTES
    np.testing.assert_array_equal(guards.read(gpu, g), host)
    assert guards.check_bands(gpu, g) is None
    assert (gpu.words(g.base, WORDS) == CANARY).all()
    assert (gpu.words(g.address + g.nbytes, WORDS) == CANARY).all()
    out = guards.allocate(gpu, "C", (2, 2))  # no host data: the middle holds canaries too (NaN)
    assert np.isnan(guards.read(gpu, out)).all()
    guards.release(g, out)
    assert g.buffer.closed and out.buffer.closed


@pytest.mark.parametrize("element, expected", [(-1, -1), (-3, -3), (12, 12), (13, 13)])
def test_host_memory_stray_write_is_found(element, expected):
    gpu = HostGpu()
    g = guards.allocate(gpu, "C (tiled)", (3, 4))
    gpu.floats(g.address + 4 * element, 1)[0] = 0.0  # one stray store just outside the matrix
    hit = guards.check_bands(gpu, g)
    assert hit["first_offsets"] == [expected] and hit["writes"] == 1
    assert "C (tiled)" in hit["message"]


def test_writes_inside_the_matrix_are_not_reported():
    gpu = HostGpu()
    g = guards.allocate(gpu, "C", (3, 4))
    gpu.floats(g.address, 12)[:] = 1.0  # every element, nothing else
    assert guards.check_bands(gpu, g) is None


def test_several_writes_counted_and_first_offsets_capped():
    gpu = HostGpu()
    g = guards.allocate(gpu, "C", (2, 2))
    gpu.floats(g.address - 4 * 3, 3)[:] = 0.0  # offsets -3, -2, -1
    gpu.floats(g.address + g.nbytes, 10)[:] = 0.0  # offsets 4 .. 13
    hit = guards.check_bands(gpu, g)
    assert hit["writes"] == 13
    assert hit["first_offsets"] == [-3, -2, -1, 4, 5, 6, 7, 8]
