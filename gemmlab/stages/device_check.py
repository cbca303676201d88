"""The after-timing verification on the device (issue 40, "cost it"): fresh inputs drawn there, the
float64 check of C there, counts and vectors brought back; the kernels are kernels/device_check.cu.

The host path (:func:`gemmlab.stages.inputs.make_problem_inputs` and
:func:`gemmlab.stages.verify.check`) moves the matrices: at 4096^3 on an H100 it cost 1.6-1.7 s a
point (15-23% of the rest; docs/trust.md), in host memory passes over the 64-128 MB arrays. Here
(for M*N*K above :data:`DEVICE_MIN_MNK`, precisions fp32/tf32/bf16/fp16, a plain problem):

- **Fresh inputs** (:meth:`DeviceCheck.draw`): every element of the logical A (M x K, stream 0) and
  B (K x N, stream 1) is a function of the seed and its logical index: SplitMix64's output function
  (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; Vigna's
  splitmix64.c), h = mix64(key + (index + 1) * 0x9E3779B97F4A7C15) with key = mix64(2 * seed +
  stream + 0x9E3779B97F4A7C15), made into ``normal`` (Box-Muller in float64 on the two 32-bit
  halves, rounded to float32), ``uniform`` (odd multiples of 2^-24 in (-1, 1)) or ``integers``
  (+-1..4), rounded once to the storage type (to nearest even), an element that rounds to zero
  stored as the smallest subnormal of its sign (never a zero input), in the problem's layout.
  :func:`draw` is the same generator in numpy (values equal but where the float64 ``log``/``cos``
  of the device and of numpy differ in their last bit and that bit changes the float32 rounding).
  A device copy of each (a snapshot) is kept for the inputs-unchanged check.
- **The check** (:meth:`DeviceCheck.check`): the same samples as the host's (:func:`verify.draw_sample`
  from the seed: rows, columns, Freivalds' ±1 vectors), uploaded as index arrays; one kernel forms the
  float64 reference and the bound's |A||B| (exact float64 sums; the host uses a float32 upper bound of
  |A||B| for the sampled rows: the device's tolerance is at most that, by a relative 2^-24 K) of the
  sampled rows (whole) and the sampled columns (the other rows), of the inputs as stored (TF32-rounded
  as the kernel declares, or by each rounding in turn for an undeclared one, as
  :func:`verify.check`), compares C by the rule (:func:`verify.bound_coefficients`, fixed, exact) and
  returns per row and 64-column tile the mismatch count, the first mismatch and the maxima; Freivalds'
  products y = B x, z = A y, |A| (|B| 1), w = C x and |C| 1 are float64 matrix-vector products on the
  device, compared on the host (:func:`verify.freivalds_compare`, vectors only); the NaN count of C
  is a device count. The verdict is a :class:`verify.Verdict` with the host's fields; its
  ``first_mismatches`` give the first failing element of each failing (row, 64-column tile) in row
  order, where the host's lists every failing element in row order (the first is the same).
- **Inputs unchanged** (:meth:`DeviceInputs.check_unchanged`): elements of A and B that differ from the
  snapshots, counted on the device; the fresh-input timing net's -A, 2A, -B are a scale kernel
  (:meth:`DeviceInputs.scale`) applied to the matrix and its snapshot.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from gemmlab.errors import SafetyNetError
from gemmlab.paths import KERNELS_DIR
from gemmlab.stages import verify as verify_stage
from gemmlab.stages.inputs import ProblemInputs, storage_dtype

SOURCE = KERNELS_DIR / "device_check.cu"
#: the after-timing verification runs on the device above this M*N*K (2^30: 1024^3; smaller problems
#: keep the host path, whose cost there is under 2% of a point: docs/trust.md)
DEVICE_MIN_MNK = 2**30
#: precisions the device check handles (fp8's per-group quantisation stays on the host)
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
TYPE_CODES = MappingProxyType({"float32": 0, "bfloat16": 1, "float16": 2})
DIST_CODES = MappingProxyType({"normal": 0, "uniform": 1, "integers": 2})
ROUND_CODES = MappingProxyType({"none": 0, "rn": 1, "rna": 2, "rz": 3})
RULE_CODES = MappingProxyType({"bound": 0, "fixed": 1, "exact": 2})
#: SplitMix64's increment (the golden ratio in 64 bits) and 2 pi as the float64 both sides use
GAMMA = 0x9E3779B97F4A7C15
TWO_PI = 6.283185307179586
MASK64 = (1 << 64) - 1
THREADS = 256
TILE = 64  # rows and columns of a gemmlab_dc_sampled block's tile
MV_CHUNK = 256  # columns per partial sum of gemmlab_dc_matvec
MV_ROWS = 8  # rows per gemmlab_dc_matvec block where a row is contiguous
BLOCKS_PER_SM = 16  # grid-stride kernels: blocks per SM
#: one line for the record: how the fresh inputs were made
GENERATOR = ("drawn on the device: SplitMix64 output of (seed, operand, logical index) (Steele, Lea & Flood, "
             "OOPSLA 2014), Box-Muller (normal) / odd multiples of 2^-24 (uniform) / +-1..4 (integers), "
             "rounded once to the storage type (nearest even), a zero stored as the smallest subnormal of its sign")


# --- the generator (numpy twin of gemmlab_dc_fill) --------------------------------------------------

def mix64(z) -> np.ndarray:
    """SplitMix64's output function (Stafford's Mix13) of uint64 ``z``, elementwise, wrapping."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def stream_key(seed: int, stream: int) -> int:
    """The key of operand ``stream`` (0: A, 1: B) for ``seed`` (0 <= seed < 2^62): mix64(2 seed +
    stream + GAMMA) mod 2^64."""
    return int(mix64(np.uint64((2 * seed + stream + GAMMA) & MASK64)))


def values(h: np.ndarray, distribution: str) -> np.ndarray:
    """float32 values of the 64-bit hashes ``h`` for ``distribution`` (as gemmlab_dc_fill's dc_draw).

    Raises:
        ValueError: an unknown distribution.
    """
    if distribution == "normal":
        u1 = ((h >> np.uint64(32)).astype(np.float64) + 0.5) * 2.0**-32  # (0, 1): never log(0) nor log(1)
        u2 = (h & np.uint64(0xFFFFFFFF)).astype(np.float64) * 2.0**-32
        return (np.sqrt(-2.0 * np.log(u1)) * np.cos(TWO_PI * u2)).astype(np.float32)
    if distribution == "uniform":
        s = 2 * (h >> np.uint64(40)).astype(np.int64) + 1 - (1 << 24)  # odd, |s| < 2^24: exact in float32
        return s.astype(np.float32) * np.float32(2.0**-24)
    if distribution == "integers":
        m = (1 + (h >> np.uint64(62))).astype(np.float32)
        return np.where(((h >> np.uint64(61)) & np.uint64(1)).astype(bool), -m, m)
    raise ValueError(f"inputs.distribution: one of {tuple(DIST_CODES)}, got {distribution!r}")


def draw(rows: int, cols: int, seed: int, stream: int, distribution: str) -> np.ndarray:
    """The logical float32 matrix (rows x cols) of operand ``stream`` that gemmlab_dc_fill writes
    (before its rounding to the storage type): element (r, c) from index r * cols + c."""
    return draw_keyed(rows, cols, stream_key(seed, stream), distribution)


def draw_keyed(rows: int, cols: int, key: int, distribution: str) -> np.ndarray:
    """:func:`draw` for a stream's ``key`` (:func:`stream_key`): h = mix64(key + (index + 1) GAMMA)."""
    index = np.arange(1, rows * cols + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = mix64(np.uint64(key) + index * np.uint64(GAMMA))
    return values(h, distribution).reshape(rows, cols)


def to_storage(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` (float32) rounded to ``dtype`` (float32, bfloat16, float16: to nearest even), an element
    that becomes zero replaced by the smallest subnormal of its sign (as gemmlab_dc_fill)."""
    dtype = np.dtype(dtype)
    out = np.ascontiguousarray(x.astype(dtype))
    word = np.dtype(f"u{dtype.itemsize}")
    bits = out.view(word)
    sign = word.type(1 << (8 * dtype.itemsize - 1))
    zero = (bits & ~sign) == 0
    if zero.any():
        bits[zero] = (bits[zero] & sign) | word.type(1)
    return out


def host_inputs(problem, seed: int, distribution: str) -> ProblemInputs:
    """The inputs :meth:`DeviceCheck.draw` makes for ``problem``, drawn on the host by :func:`draw`
    (tests, and a host path that needs them): a :class:`~gemmlab.stages.inputs.ProblemInputs` with
    the logical float32 ``a``, ``b`` and the stored images in the problem's layouts.

    Raises:
        ValueError: a precision the device check does not handle, or an unknown distribution.
    """
    if problem.precision not in PRECISIONS:
        raise ValueError(f"precision: the device check handles {PRECISIONS}, got {problem.precision!r}")
    dtype = storage_dtype(problem.precision)
    a_st = to_storage(draw(problem.M, problem.K, seed, 0, distribution), dtype)
    b_st = to_storage(draw(problem.K, problem.N, seed, 1, distribution), dtype)
    return ProblemInputs(a=a_st.astype(np.float32), b=b_st.astype(np.float32),
                         a_stored=np.ascontiguousarray(a_st if problem.layout_a == "row" else a_st.T),
                         b_stored=np.ascontiguousarray(b_st if problem.layout_b == "row" else b_st.T))


def applies(problem, d_a=None, d_b=None, min_mnk: int | None = None) -> bool:
    """Whether the inputs of ``problem`` can be drawn and its C verified on the device: M*N*K above
    ``min_mnk`` (None: :data:`DEVICE_MIN_MNK`), a precision of :data:`PRECISIONS`, no grouped problem,
    no epilogue, output type, leading dimension or batch beyond the plain contract (issue 43),
    and A and B stored dense (``d_a``/``d_b``: the guard-banded matrices, M x K or K x M and K x N or
    N x K; None: not allocated yet, the plain contract stores them dense). Used when
    ``verify.after_timing`` or ``inputs.draw`` is ``auto`` or ``device``."""
    M, N, K = problem.M, problem.N, problem.K
    min_mnk = DEVICE_MIN_MNK if min_mnk is None else min_mnk
    dense_a = (M, K) if problem.layout_a == "row" else (K, M)
    dense_b = (K, N) if problem.layout_b == "row" else (N, K)
    return (problem.precision in PRECISIONS and M * N * K > min_mnk
            and getattr(problem, "grouped", None) is None and not getattr(problem, "extended", False)
            and (d_a is None or tuple(d_a.shape) == dense_a) and (d_b is None or tuple(d_b.shape) == dense_b))


def roundings_for(precision: str, declared: list) -> tuple[str, ...]:
    """The TF32 roundings a point's checks need: each backend's declared ``tf32_rounding`` (``declared``),
    every one of :data:`verify.TF32_ROUNDINGS` for a backend that declares none; ``("none",)`` for
    other precisions."""
    if precision != "tf32":
        return ("none",)
    return tuple(dict.fromkeys(r for d in declared for r in ((d,) if d else verify_stage.TF32_ROUNDINGS)))


# --- device side ----------------------------------------------------------------------------------

def _u64(address: int) -> np.uint64:
    return np.uint64(address)


@dataclass
class Snapshot:
    """A device copy of an input's elements (``buffer``: the allocation, released with the point's
    other buffers by :func:`gemmlab.gpu.guards.release`)."""

    name: str
    buffer: object
    nbytes: int

    @property
    def address(self) -> int:
        """The device address of the copy's first element."""
        return int(self.buffer.handle)


@dataclass
class DeviceInputs:
    """Fresh inputs drawn on the device into the point's own A and B (:meth:`DeviceCheck.draw`).

    Attributes:
        checker: the :class:`DeviceCheck` that drew them.
        a, b: the guard-banded matrices A and B (:class:`gemmlab.gpu.guards.GuardedMatrix`).
        snapshots: device copies of A's and B's elements as drawn (and scaled since).
        seed, distribution: what they were drawn from.
    """

    checker: "DeviceCheck"
    a: object
    b: object
    snapshots: tuple
    seed: int
    distribution: str
    #: "A"/"B" -> (v, y): a fingerprint of the snapshot (y = X v for a secret float64 vector v, on the
    #: device, kept here), taken before any kernel ran: the snapshots live in device memory a kernel
    #: could write, so each check first shows they still hold what was drawn (:meth:`verify_sealed`)
    seals: dict = field(default_factory=dict)
    scaled: bool = False

    @property
    def owned(self) -> list:
        """The allocations the point releases at its end (:attr:`snapshots`)."""
        return list(self.snapshots)

    def scale(self, a: float | None = None, b: float | None = None) -> None:
        """Multiply A and/or B (and their snapshots) in place on the device by ``a`` / ``b`` (exact:
        -1, 2, -2 on values far from overflow), B first, the matrix after its snapshot (so A is the
        last thing written before a launch, as the host path's upload of A was)."""
        self.verify_sealed()  # what is scaled is what was drawn
        for i, (g, factor) in ((1, (self.b, b)), (0, (self.a, a))):
            if factor is None:
                continue
            self.checker.scale(self.snapshots[i].address, g, factor)
            self.checker.scale(g.address, g, factor)
            self.scaled = True
        self.seal()

    def touch_a(self) -> None:
        """The same pass over A as :meth:`scale` makes (by 1: the values stay), before the second
        launch of the fresh-input timing net, so both of its launches follow the same device work."""
        self.checker.scale(self.a.address, self.a, 1.0)

    def seal(self) -> None:
        """Fingerprint both snapshots now (:attr:`seals`; a new secret vector each time)."""
        self.seals = {name: self.checker.fingerprint(name, snap.address)
                      for name, snap in zip(("A", "B"), self.snapshots)}

    def tampered(self) -> list[str]:
        """The inputs whose snapshot no longer gives its fingerprint (bitwise: the same vector, the same
        device reduction order), in order A, B."""
        return [name for name, snap in zip(("A", "B"), self.snapshots)
                if name in self.seals and not np.array_equal(
                    self.checker.fingerprint(name, snap.address, self.seals[name][0])[1], self.seals[name][1])]

    def verify_sealed(self) -> None:
        """The snapshots still hold the drawn inputs (:meth:`tampered`).

        Raises:
            SafetyNetError: ``inputs_modified``: a kernel wrote the device copy the checks read.
        """
        bad = self.tampered()
        if bad:
            raise SafetyNetError("inputs_modified", f"the kernel wrote the device copy of its input {bad[0]} that the "
                                 "checks read (its fingerprint, taken before any launch, changed)")

    def redraw(self, seed: int) -> None:
        """New inputs from ``seed`` in A, B and their snapshots (the fresh-input timing net's unseen
        values), sealed; the record's seed is ``seed`` from now on."""
        self.checker.fill(self.a, self.b, seed)
        self.seed, self.scaled = seed, False
        self.checker.snapshot_into(self)
        self.seal()

    def restore(self) -> None:
        """Write A and B again (the host path's upload of the inputs again): drawn again from the seed
        by the generator into A, B and their snapshots, sealed again (a kernel may have written the
        snapshots too). Only before :meth:`scale`.

        Raises:
            RuntimeError: the inputs were scaled since they were drawn.
        """
        if self.scaled:
            raise RuntimeError("DeviceInputs.restore: the inputs were scaled since they were drawn")
        self.checker.fill(self.a, self.b, self.seed)
        self.checker.snapshot_into(self)
        self.seal()

    def changed(self) -> tuple[int, int]:
        """Elements of A and of B that differ (bitwise) from their snapshots, counted on the device."""
        return self.checker.diff([(self.a, self.snapshots[0]), (self.b, self.snapshots[1])])

    def check_unchanged(self, record: dict) -> None:
        """The inputs-unchanged net on the device: sets ``record["inputs_unchanged"]``.

        Raises:
            SafetyNetError: ``inputs_modified``, naming the input and how many elements changed.
        """
        try:
            self.verify_sealed()
        except SafetyNetError:
            record["inputs_unchanged"] = False
            raise
        for g, count in zip((self.a, self.b), self.changed()):
            if count:
                record["inputs_unchanged"] = False
                raise SafetyNetError("inputs_modified", f"the kernel wrote its input {g.name}: {count} element(s) changed")
        record["inputs_unchanged"] = True


def kernel_names(problem, roundings: tuple[str, ...] = ("none",), distribution: str = "normal") -> dict:
    """The name expression of each device-check kernel a problem's check launches (``fill``, ``scale``,
    ``copy``, ``diff``, ``nan``, ``sum``, ``matvec_c``; per TF32 rounding of ``roundings``:
    ``("matvec_a", r)``, ``("matvec_b", r)``, ``("sampled", r)``), instances of kernels/device_check.cu
    for the storage type, layouts and ``distribution`` of ``problem``.

    Raises:
        KeyError: a precision, distribution or rounding the device check does not handle.
    """
    dtype = storage_dtype(problem.precision)
    t = TYPE_CODES[dtype.name]
    la, lb = int(problem.layout_a == "col"), int(problem.layout_b == "col")
    names = {"fill": f"gemmlab_dc_fill<{t}, {DIST_CODES[distribution]}>", "scale": f"gemmlab_dc_scale<{t}>",
             "copy": "gemmlab_dc_copy<0>", "diff": f"gemmlab_dc_diff<{dtype.itemsize}>",
             "nan": "gemmlab_dc_nan<0>", "sum": "gemmlab_dc_sum<0>", "matvec_c": "gemmlab_dc_matvec<0, 0, 0>"}
    for r in dict.fromkeys((*roundings, "none")):  # "none": the inputs' fingerprints (DeviceInputs.seal)
        code = ROUND_CODES[r]
        names[("matvec_a", r)] = f"gemmlab_dc_matvec<{t}, {code}, {la}>"
        names[("matvec_b", r)] = f"gemmlab_dc_matvec<{t}, {code}, {lb}>"
        if r in roundings:
            names[("sampled", r)] = f"gemmlab_dc_sampled<{t}, {code}, {la}, {lb}>"
    return names


def compile_kernels(problem, roundings: tuple[str, ...], distribution: str, arch: str, cache_enabled: bool = False,
                    cache_dir: str | None = None, driver_version: str = "none"):
    """Compile the device-check kernels of ``problem`` (:func:`kernel_names`) into one cubin for
    ``sm_<arch>`` (no GPU needed): what :class:`DeviceCheck` loads, with the same compile key, so a
    compile ahead of the run (``cache_enabled``: into the on-disk cache, ``driver_version`` the run's;
    :mod:`gemmlab.run.precompile`) is the run's cache hit. Returns the
    :class:`gemmlab.gpu.compile.CompiledKernel`.

    Raises:
        CompileError: NVRTC failed (a bug here, never the user's input).
    """
    from gemmlab.gpu import compile as compile_stage
    unique = tuple(dict.fromkeys(kernel_names(problem, roundings, distribution).values()))
    return compile_stage.compile_kernel(
        SOURCE, unique[0], compile_stage.CompileOptions(arch=arch), persistent=cache_enabled,
        cache_folder=cache_dir, driver_version=driver_version, extra_names=unique[1:], disassemble=False)


class DeviceCheck:
    """The device-check kernels of one problem, compiled (NVRTC, in-process and optionally on-disk
    cache) and loaded for ``gpu``, and the host logic around them.

    Args:
        gpu: a :class:`gemmlab.gpu.device.Gpu` (or the tests' fake with the same methods).
        problem: the :class:`~gemmlab.contract.hookspecs.Problem` (a precision of :data:`PRECISIONS`).
        roundings: TF32 roundings the checks will use (``("none",)`` for other precisions).
        distribution: the inputs' distribution (the fill kernel's instance).
        cache_enabled, cache_dir, driver_version: the run's compile cache settings.

    Raises:
        ValueError: a precision or distribution the device check does not handle.
        CompileError: NVRTC failed (a bug here, never the user's input).
    """

    def __init__(self, gpu, problem, roundings: tuple[str, ...] = ("none",), distribution: str = "normal",
                 cache_enabled: bool = False, cache_dir: str | None = None, driver_version: str = "none"):
        if problem.precision not in PRECISIONS:
            raise ValueError(f"precision: the device check handles {PRECISIONS}, got {problem.precision!r}")
        if distribution not in DIST_CODES:
            raise ValueError(f"inputs.distribution: one of {tuple(DIST_CODES)}, got {distribution!r}")
        self.gpu, self.problem, self.roundings = gpu, problem, tuple(roundings)
        self.dtype = storage_dtype(problem.precision)
        self.names = kernel_names(problem, self.roundings, distribution)
        unique = tuple(dict.fromkeys(self.names.values()))
        self.compiled = compile_kernels(problem, self.roundings, distribution, gpu.facts.arch, cache_enabled,
                                        cache_dir, driver_version)
        self.loaded = {name: gpu.load(self.compiled.object_code, name, 0) for name in unique}
        self.compile_record = {"source_file": str(SOURCE.name), "name_expressions": list(unique),
                               "compile_ms": round(self.compiled.compile_ms, 3),
                               "cache_hit_in_process": self.compiled.cache_hit, "disk_cache": self.compiled.disk_cache}

    # --- launches -----------------------------------------------------------------------------
    def _launch(self, key, grid: tuple[int, int], args: tuple) -> None:
        from gemmlab.contract.hookspecs import Launch
        name = self.names[key]
        launch = Launch(grid=(int(grid[0]), int(grid[1]), 1), block=(THREADS, 1, 1))
        self.gpu.launcher(self.loaded[name], launch, args)()

    def _grid(self, n: int) -> tuple[int, int]:
        """A grid-stride kernel's grid for ``n`` elements."""
        return (max(1, min(-(-n // THREADS), BLOCKS_PER_SM * self.gpu.facts.sm_count)), 1)

    def _scratch(self, nbytes: int):
        return self.gpu.allocate(max(int(nbytes), 8))

    def _upload(self, array: np.ndarray):
        buf = self._scratch(array.nbytes)
        if array.nbytes:
            self.gpu.upload(int(buf.handle), np.ascontiguousarray(array))
        return buf

    def _download(self, buf, dtype, count: int) -> np.ndarray:
        nbytes = count * np.dtype(dtype).itemsize
        return self.gpu.download(int(buf.handle), nbytes).view(dtype)[:count]

    # --- inputs -------------------------------------------------------------------------------
    def draw(self, d_a, d_b, seed: int, distribution: str) -> DeviceInputs:
        """Fill A and B (guard-banded matrices of this problem) with the generator's values for
        ``seed`` (module docstring; :func:`draw` and :func:`to_storage` are its twin) and snapshot
        them on the device."""
        self.fill(d_a, d_b, seed)
        snapshots = tuple(Snapshot(f"{g.name} (snapshot)", self._scratch(4 * -(-g.nbytes // 4)), g.nbytes)
                          for g in (d_a, d_b))
        fresh = DeviceInputs(self, d_a, d_b, snapshots, seed, distribution)
        self.snapshot_into(fresh)
        fresh.seal()
        return fresh

    def fill(self, d_a, d_b, seed: int) -> None:
        """A and B (this problem's guard-banded matrices) filled with the generator's values for ``seed``."""
        p = self.problem
        for g, (rows, cols), layout, stream in ((d_a, (p.M, p.K), p.layout_a, 0), (d_b, (p.K, p.N), p.layout_b, 1)):
            self._launch("fill", self._grid(rows * cols), (_u64(g.address), np.int64(rows), np.int64(cols),
                                                            np.int32(layout == "col"),
                                                            np.uint64(stream_key(seed, stream))))

    def snapshot_into(self, fresh: "DeviceInputs") -> None:
        """Copy A and B into ``fresh``'s snapshots (whole words)."""
        for g, snap in ((fresh.a, fresh.snapshots[0]), (fresh.b, fresh.snapshots[1])):
            words = -(-g.nbytes // 4)
            self._launch("copy", self._grid(words), (_u64(g.address), _u64(snap.address), np.int64(words)))

    def fingerprint(self, which: str, address: int, v: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(v, X v)``: the logical input ``which`` ("A": M x K, "B": K x N, this problem's type and
        layout, unrounded) at ``address`` times the float64 vector ``v`` (default: a new one, normal,
        from a secret seed), on the device; the vector's device copy is zeroed before it is freed."""
        p = self.problem
        rows, cols, layout, key = ((p.M, p.K, p.layout_a, ("matvec_a", "none")) if which == "A"
                                   else (p.K, p.N, p.layout_b, ("matvec_b", "none")))
        if v is None:
            v = np.random.default_rng(secrets.randbits(64)).standard_normal(cols)
        vec = self._upload(np.asarray(v, dtype=np.float64)[None, :])
        try:  # v, X v and X v's partial sums zeroed before their memory is freed (v stays secret)
            out = self._matvec(key, address, rows, cols, layout, int(vec.handle), 1, 0, zero_partial=True)
            try:
                return v, self._download(out, np.float64, rows).copy()
            finally:
                self.gpu.fill32(int(out.handle), 0, 2 * rows)
                out.close()
        finally:
            self.gpu.fill32(int(vec.handle), 0, 2 * cols)
            vec.close()

    def scale(self, address: int, g, factor: float) -> None:
        """Multiply the ``g.shape`` elements (A's or B's type) at ``address`` by ``factor`` in place."""
        n = g.shape[0] * g.shape[1]
        self._launch("scale", self._grid(n), (_u64(address), np.int64(n), np.float32(factor)))

    def diff(self, pairs: list) -> tuple[int, ...]:
        """For each (guarded matrix, :class:`Snapshot`): how many elements differ bitwise."""
        counts = self._scratch(8 * len(pairs))
        try:
            self.gpu.fill32(int(counts.handle), 0, 2 * len(pairs))
            for i, (g, snap) in enumerate(pairs):
                n = g.shape[0] * g.shape[1]
                self._launch("diff", self._grid(n), (_u64(g.address), _u64(snap.address), np.int64(n),
                                                     _u64(int(counts.handle) + 8 * i)))
            return tuple(int(x) for x in self._download(counts, np.uint64, len(pairs)))
        finally:
            counts.close()

    # --- the check ----------------------------------------------------------------------------
    def check(self, c, fresh: DeviceInputs, options: verify_stage.VerifyOptions, distribution: str = "normal",
              seed: int = 0, products: dict | None = None,
              tf32_rounding: str | None = None) -> verify_stage.Verdict:
        """Verify C (``c``: the guard-banded float32 C, M x N row-major) against A @ B of the inputs
        ``fresh`` drew (read from its snapshots: a kernel that writes A or B does not move the
        reference; the inputs-unchanged net then refuses it), on the device, by the rule and method of :func:`gemmlab.stages.verify.check` with
        the same arguments (``products``: a dict shared by a kernel and its baseline on the same
        inputs: Freivalds' input-side vectors are computed once there). TF32: the declared rounding,
        or each of :data:`verify.TF32_ROUNDINGS` in turn until one passes (the verdict's ``tf32``).

        Raises:
            ValueError: an unknown ``tf32_rounding``, or one this checker was not compiled for.
            SafetyNetError: ``inputs_modified``: the snapshots no longer hold what was drawn.
        """
        precision = self.problem.precision
        fresh.verify_sealed()  # the reference is read from the snapshots: they must hold what was drawn
        self.inputs = fresh
        side: dict = {}  # C's side, the same for every rounding: NaN count, C x, |C| 1
        if precision != "tf32":
            return self._check(c, options, distribution, precision, seed, products, "none", side)
        return verify_stage.tf32_verdict(
            lambda rounding: self._check(c, options, distribution, precision, seed, products, rounding, side),
            tf32_rounding)

    def _check(self, c, options, distribution, precision, seed, products, rounding, side) -> verify_stage.Verdict:
        if ("sampled", rounding) not in self.names:
            raise ValueError(f"tf32 rounding {rounding!r}: this device check was compiled for {self.roundings}")
        p = self.problem
        M, N, K = p.M, p.N, p.K
        rule = verify_stage.resolve_rule(options, distribution)
        method = options.method
        if method == "auto":
            method = "full" if M * N * K <= options.max_full else "sampled"
        if "nan" not in side:
            side["nan"] = self._nan_count(c)
        if method == "full":
            parts = [self._part(c, None, None, rule, options, precision, rounding)]
            freivalds = None
            described = "full float64 reference, every element"
        else:
            rows, cols, xs = verify_stage.draw_sample(seed, M, N, options)
            others = np.setdiff1d(np.arange(M), rows)  # columns are checked outside the sampled rows
            parts = [self._part(c, rows, None, rule, options, precision, rounding),
                     self._part(c, others, cols, rule, options, precision, rounding)]
            cache = products if products is not None else {}
            key = ("device freivalds", seed, rounding, options.trials, rule, options.safety)
            if key not in cache:
                cache[key] = self._freivalds_sides(xs, rule, options, precision, rounding)
            if "lhs" not in side:
                side["lhs"], side["abs_c_rows"] = self._c_side(c, xs)
            freivalds = verify_stage.freivalds_compare(side["lhs"], side["abs_c_rows"], cache[key], rule, options)
            described = (f"sampled: {len(rows)} whole rows and {len(cols)} whole columns vs float64, plus "
                         f"Freivalds' check of the whole product with {options.trials} random ±1 vectors")
        mismatches = sum(q["mismatches"] for q in parts)
        nan_outputs = side["nan"]
        passed = mismatches == 0 and nan_outputs == 0 and (freivalds is None or freivalds["passed"])
        return verify_stage.Verdict(
            passed=passed, max_abs_error=max(q["max_abs"] for q in parts), max_rel_error=max(q["max_rel"] for q in parts),
            mismatches=mismatches, nan_outputs=nan_outputs, atol=options.atol, rtol=options.rtol,
            first_mismatches=[f for q in parts for f in q["first"]][:verify_stage.FIRST_MISMATCHES], rule=rule,
            method=described, max_error_over_tolerance=max(q["max_ratio"] for q in parts),
            safety=options.safety if rule == "bound" else None, freivalds=freivalds)

    def _nan_count(self, c) -> int:
        counts = self._scratch(8)
        try:
            self.gpu.fill32(int(counts.handle), 0, 2)
            n = c.shape[0] * c.shape[1]
            self._launch("nan", self._grid(n), (_u64(c.address), np.int64(n), _u64(int(counts.handle))))
            return int(self._download(counts, np.uint64, 1)[0])
        finally:
            counts.close()

    def _part(self, c, rows, cols, rule, options, precision, rounding) -> dict:
        """One gemmlab_dc_sampled launch over ``rows`` x ``cols`` (index arrays; None: all of M / N):
        the host's ``_compare`` dict (mismatches, max_abs, max_rel, max_ratio, first)."""
        p = self.problem
        R = p.M if rows is None else len(rows)
        Cn = p.N if cols is None else len(cols)
        if R == 0 or Cn == 0:
            return {"mismatches": 0, "max_abs": 0.0, "max_rel": 0.0, "max_ratio": 0.0, "first": []}
        tiles = -(-Cn // TILE)
        cells = R * tiles
        coef_abs, coef_ref = verify_stage.bound_coefficients(options, p.K, precision)
        # per (row, tile): int32 count, first; float32 got; float64 expected, ratio, abs error, rel error
        layout = [("count", np.int32), ("first", np.int32), ("got", np.float32), ("expected", np.float64),
                  ("ratio", np.float64), ("abserr", np.float64), ("relerr", np.float64)]
        offsets, size = {}, 0
        for name, dtype in layout:
            offsets[name] = size
            size += -(-cells * np.dtype(dtype).itemsize // 8) * 8
        owned = []
        try:
            stats = self._scratch(size)
            owned.append(stats)
            index = []
            for ix in (rows, cols):
                if ix is None:
                    index.append(np.uint64(0))
                else:
                    buf = self._upload(np.asarray(ix, dtype=np.int32))
                    owned.append(buf)
                    index.append(_u64(int(buf.handle)))
            base = int(stats.handle)
            self._launch(("sampled", rounding), (tiles, -(-R // TILE)), (
                _u64(self.inputs.snapshots[0].address), _u64(self.inputs.snapshots[1].address), _u64(c.address), index[0], index[1],
                np.int32(R), np.int32(Cn), np.int64(p.M), np.int64(p.N), np.int64(p.K), np.int32(RULE_CODES[rule]),
                np.float64(coef_abs), np.float64(coef_ref), np.float64(options.atol), np.float64(options.rtol),
                *(_u64(base + offsets[name]) for name, _ in layout)))
            raw = self.gpu.download(base, size)
        finally:
            for buf in owned:
                buf.close()
        got = {name: raw[offsets[name]:offsets[name] + cells * np.dtype(dt).itemsize].view(dt).reshape(R, tiles)
               for name, dt in layout}
        return summarize(got, rows, cols)

    def _matvec(self, key, address: int, rows: int, cols: int, layout: str, v_address: int, nv: int,
                abs_mask: int, zero_partial: bool = False):
        """float64 g_t(X) v_t (t < ``nv``; g_t = |.| where bit t of ``abs_mask`` is set) for the logical
        X (rows x cols, A's or B's type, stored ``layout``) at ``address`` and the float64 vectors
        (nv x cols) at ``v_address``: a new device buffer of nv x rows float64 (the caller closes it)."""
        chunks = -(-cols // MV_CHUNK)
        partial = self._scratch(8 * chunks * nv * rows)
        try:
            gx = -(-rows // MV_ROWS) if layout == "row" else -(-rows // THREADS)
            self._launch(key, (gx, chunks), (_u64(address), np.int64(rows), np.int64(cols), _u64(v_address),
                                             np.int32(nv), np.int32(abs_mask), _u64(int(partial.handle))))
            out = self._scratch(8 * nv * rows)
            self._launch("sum", self._grid(nv * rows), (_u64(int(partial.handle)), np.int32(chunks),
                                                        np.int64(nv * rows), _u64(int(out.handle))))
            return out
        finally:
            if zero_partial:  # the per-chunk sums would give v away to a later kernel reading freed memory
                self.gpu.fill32(int(partial.handle), 0, 2 * chunks * nv * rows)
            partial.close()

    def _freivalds_sides(self, xs: list, rule: str, options, precision: str, rounding: str) -> dict:
        """The inputs' side of Freivalds' check (:func:`verify._freivalds_sides`' fields) on the device:
        y = B x per vector and |B| 1, then z = A y and |A| (|B| 1), float64."""
        p, fresh = self.problem, self.inputs
        trials = len(xs)
        mask = 1 << trials  # the last vector multiplies |B|, then |A|
        owned = [self._upload(np.vstack([*xs, np.ones(p.N)]).astype(np.float64))]
        try:
            owned.append(self._matvec(("matvec_b", rounding), fresh.snapshots[1].address, p.K, p.N, p.layout_b,
                                      int(owned[0].handle), trials + 1, mask))
            owned.append(self._matvec(("matvec_a", rounding), fresh.snapshots[0].address, p.M, p.K, p.layout_a,
                                      int(owned[1].handle), trials + 1, mask))
            out = self._download(owned[2], np.float64, (trials + 1) * p.M).reshape(trials + 1, p.M).copy()
        finally:
            for buf in owned:
                buf.close()
        sides = {"xs": xs, "rhs": list(out[:trials]), "N": p.N, "ref_coefficient": verify_stage.U_FP32}
        if rule == "bound":
            sides["bound_rows"] = verify_stage.bound_coefficients(options, p.K, precision)[0] * out[trials]
        return sides

    def _c_side(self, c, xs: list) -> tuple[np.ndarray, np.ndarray]:
        """C x per vector (M x trials) and |C| 1 (M), float64, on the device."""
        p = self.problem
        trials = len(xs)
        owned = [self._upload(np.vstack([*xs, np.ones(p.N)]).astype(np.float64))]
        try:
            owned.append(self._matvec("matvec_c", c.address, p.M, p.N, "row", int(owned[0].handle), trials + 1,
                                      1 << trials))
            out = self._download(owned[1], np.float64, (trials + 1) * p.M).reshape(trials + 1, p.M).copy()
        finally:
            for buf in owned:
                buf.close()
        return out[:trials].T, out[trials]


def summarize(stats: dict, rows: np.ndarray | None, cols: np.ndarray | None) -> dict:
    """The host's ``_compare`` dict from gemmlab_dc_sampled's per (row, tile) arrays ``stats`` (each
    R x tiles: count, first, got, expected, ratio, abserr, relerr; kernels/device_check.cu), the row
    and column indices (None: identity)."""
    count = stats["count"]
    bad = np.nonzero(count)  # row-major: rows in order, tiles in order within a row
    first = []
    for i, t in zip(*(ix[:verify_stage.FIRST_MISMATCHES] for ix in bad)):
        j = int(stats["first"][i, t])
        got = float(stats["got"][i, t])
        first.append([int(rows[i]) if rows is not None else int(i), int(cols[j]) if cols is not None else j,
                      got if math.isfinite(got) else str(np.float32(got)), float(stats["expected"][i, t])])
    abserr = stats["abserr"]
    finite = abserr >= 0
    return {"mismatches": int(count.sum()),
            "max_abs": float(abserr[finite].max()) if finite.any() else (float("inf") if abserr.size else 0.0),
            "max_rel": float(stats["relerr"].max()) if stats["relerr"].size else 0.0,
            "max_ratio": float(stats["ratio"].max()) if stats["ratio"].size else 0.0, "first": first}
