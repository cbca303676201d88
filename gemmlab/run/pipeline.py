"""One experiment point, end to end: validate -> compile -> inputs -> NaN-fill -> verify -> time ->
safety nets -> record. No Hydra state in here: tests, notebooks and other tools call
:func:`run_point` directly. What the point's folder holds (an earlier record, resume, adoption of the
same config's record from another folder of the sweep) is decided by the store
(:func:`gemmlab.run.store.open_point`) before any phase runs.

With ``baseline=<kernel>`` a second kernel (usually ``cublas``) gets the same inputs, the same
verification and the same timing protocol, sampled alternately with the kernel in one process;
the record gains ``ratio_to_baseline``.
"""

from __future__ import annotations

import dataclasses
import secrets
import signal
import statistics
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from gemmlab.gpu import compile as compile_stage
from gemmlab.gpu import guards
from gemmlab.stages import device_check
from gemmlab.stages import hostpass
from gemmlab.stages import inputs as inputs_stage
from gemmlab.stages import record as record_stage
from gemmlab.stages import timing as timing_stage
from gemmlab.stages import verify as verify_stage
from gemmlab.stages import verify_fused
from gemmlab.stages.config import RunConfig, _plain, parse_config
from gemmlab.dispatch.auto import resolve_config as resolve_auto
from gemmlab.errors import CompileError, ConfigError, GemmlabError, SafetyNetError, UnavailableError, VerificationError
from gemmlab.gpu.backends import Buffers, backend_for
from gemmlab.contract.epilogue import activation_error
from gemmlab.contract.hookspecs import Launch, ParamError, Problem
from gemmlab.stages.roofline import plausibility, roofline
from gemmlab.contract.registry import Registry, registries
from gemmlab.run import first_use, store

EXIT_INVALID = 2
EXIT_FAILED = 1
#: the safety net each failure status comes from, named in the record's ``nets_fired``
NETS = MappingProxyType({"wrong_result": "verification", "wrong_after_timing": "verification after timing",
                         "implausible": "plausibility", "out_of_bounds": "guard bands",
                         "inputs_modified": "inputs unchanged", "unstable": "repeat stability",
                         "cuda_error": "cuda error", "missing_instructions": "instruction classes",
                         "foreign_launch": "launch path", "sanitizer_errors": "sanitizer",
                         "cached_result": "fresh-input timing"})


def clear_cache() -> None:
    """Forget the active session's loaded plugin registries (a plugin folder edited since is loaded
    again) and the configs of sweep records read for ``resume`` (:func:`gemmlab.run.store.clear_cache`).
    For tests and long-lived processes (see :func:`gemmlab.clear_caches`)."""
    registries().clear()
    store.clear_cache()


def registry_for(cfg: Mapping[str, Any]) -> Registry:
    """The registry for the ``plugin_dirs`` of ``cfg``, loaded once by the active session
    (:class:`gemmlab.contract.registry.Registries`; the default session's outside any).

    Raises:
        ConfigError: ``plugin_dirs`` is not a list of folders, or a plugin fails to load.
    """
    dirs = _plain(cfg.get("plugin_dirs")) or []
    if isinstance(dirs, str) or not isinstance(dirs, (list, tuple)) or not all(isinstance(d, str) for d in dirs):
        raise ConfigError("plugin_dirs", f"must be a list of directory paths, got {dirs!r}")
    return registries().get(tuple(dirs))


def exit_status(record: Mapping[str, Any]) -> int:
    """0 for a valid record, 2 for invalid input, 1 for any other failure."""
    if record.get("valid"):
        return 0
    return EXIT_INVALID if record.get("status") == ConfigError.status else EXIT_FAILED


def run_point(cfg: Mapping[str, Any], out_dir: str | Path, check_only: bool = False) -> dict:
    """Run one experiment point and write ``out_dir/result.json``.

    Args:
        cfg: the composed config (``DictConfig`` or dict with the keys of ``conf/config.yaml``).
        out_dir: the run's own directory (created if missing; must not hold a result yet).
        check_only: stop after verification and the safety nets (no timing, no sanitizer); the
            status is then ``checked``. Used by the sanitizer's child process.

    Returns:
        The record written to ``result.json``. ``record["status"]`` is ``ok`` (verified and
        timed), ``compiled`` (``mode=compile``), ``checked``, or a failure: ``invalid``,
        ``compile_error``, ``wrong_result``, ``out_of_bounds``, ``unstable``, ``inputs_modified``,
        ``sanitizer_errors``, ``wrong_after_timing``, ``cached_result``, ``foreign_launch``, ``implausible``,
        ``missing_instructions`` (a declared SASS class absent from the
        main kernel, refused after compiling), ``cuda_error``, ``no_gpu``, ``unavailable``, ``error``;
        ``record["error"]`` holds the one-line reason. Failures never raise: a sweep goes on.
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    plain = None
    try:
        plain = _plain(cfg)  # the config is resolved once; every phase reads this plain mapping
        record = record_stage.new_record(plain)
    except Exception as exc:  # e.g. an interpolation that does not resolve
        record = record_stage.new_record(None)
        record.fail(ConfigError.status, f"config: cannot resolve: {str(exc).splitlines()[0]}")
    early = store.open_point(plain, out_dir, record)  # the folder: resume, adopt, refuse, or run
    if early is not None:
        return early
    from gemmlab.stages import hostmem
    reset = hostmem.reset_peak()
    try:
        Run(plain, out_dir, record, check_only).execute()
    except ParamError as exc:
        record.fail(ConfigError.status, str(exc))
    except GemmlabError as exc:
        record.fail(exc.status, str(exc))
        if exc.status in NETS:  # the safety net that refused the point, named once
            record.fire(NETS[exc.status])
        if isinstance(exc, CompileError):
            store.write_artifact(out_dir, "compile.log", exc.log)
    except (Exception, KeyboardInterrupt) as exc:  # an unexpected failure still leaves a record behind
        if isinstance(exc, KeyboardInterrupt) and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            raise  # a real Ctrl-C (a point run in the command's own process): the command stops
        # in a point's worker Ctrl-C is ignored (gemmlab.run.isolation), so an interrupt there is raised
        # by the plugin's own code: its point's error, like any other exception of the plugin
        from gemmlab.contract.registry import describe_exception
        store.write_artifact(out_dir, "traceback.txt", traceback.format_exc())
        record.fail("error", describe_exception(exc, out_dir / "traceback.txt"))
    record.finish()  # valid from the status (gemmlab.stages.record.Result)
    record["host_memory"] = hostmem.peak(reset)
    # the whole point in this process but the record's writing: the phases plus what lies between them
    # (the folder's store, the record); a caller's wall beyond it is the worker round trip (issue 41)
    record.setdefault("phase_s", {})["run_point"] = round(time.perf_counter() - started, 4)
    store.write_record(record, out_dir)
    return record


@dataclass
class Run:
    """One point in flight: the config parsed once, the kernel and baseline backends, and what
    each phase hands the next. :meth:`execute` runs the phases in order:

    :meth:`validate` (bad input fails before anything compiles or the GPU opens) ->
    :meth:`compile_only` (``mode=compile``) or :meth:`open_device` -> :meth:`compile` ->
    :meth:`allocate` -> :meth:`correctness` -> :meth:`time` -> :meth:`safety_nets` ->
    :meth:`sanitize`; :meth:`release` always runs last.
    """

    cfg: Any
    out_dir: Path
    record: dict
    check_only: bool = False
    rc: RunConfig | None = None
    backends: list = field(default_factory=list)
    gpu: Any = None
    inputs: Any = None
    d_a: Any = None
    d_b: Any = None
    owned: list = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    products: dict = field(default_factory=dict)
    replay: dict = field(default_factory=dict)
    d_scales: tuple = ()  # precision=fp8: the scale buffers of A and B (guard-banded, inputs)
    d_groups: tuple = ()  # grouped GEMM (issue 44): (buffer, host array) of each group array (inputs)
    d_epilogue: tuple = ()  # issue 43: (buffer, host array) of C0 and the bias where the problem has them (inputs)
    tuning: Any = None  # kernel=auto's first-use tuning: the candidates are backends of this run (first_use.Tuning)
    checker: Any = None  # inputs.draw on the device: the DeviceCheck that drew A and B and verifies C (self.inputs: its DeviceInputs)

    @property
    def problem(self) -> Problem:
        return self.rc.problem

    def execute(self) -> None:
        self._timed("validate", self.validate)  # kernel=auto's choice too (first-use tuning: its plan, run below)
        if self.rc.mode == "compile":
            self.compile_only()
            return
        try:
            self._timed("open_device", self.open_device)
            self._timed("compile", self.compile)
            self._timed("allocate", self.allocate)  # inputs drawn and uploaded, outputs allocated
            self._timed("correctness", self.correctness)  # the first launch and its float64 verification
            if self.check_only:
                self._inputs_unchanged()
                self.record.succeed("checked")
                return
            self._timed("launch_paths", self.launch_paths)
            try:
                self.time()
                self._timed("safety_nets", self.safety_nets)
                self.after_timing()
                if self.tuning is not None:  # the fastest candidate left becomes the point's kernel
                    self._tuned(self.tuning.finish(self))
                self.sanitize()
            except GemmlabError as exc:  # a net that fired after the samples: their figures are not kept
                if exc.status in NETS and "withheld" not in self.record:
                    _withhold(self.record, self.backends, NETS.get(exc.status, exc.status))
                raise
            self.record.succeed("ok")
            if self.tuning is not None:
                self.tuning.store()
        finally:
            self.release()

    def _timed(self, name: str, phase) -> None:
        """Run ``phase()`` and record its wall seconds as ``phase_s.<name>`` (also when it raises), so
        a record says where a point's time went (``time`` and ``after_timing`` record their own)."""
        started = time.perf_counter()
        try:
            phase()
        finally:
            self.record.setdefault("phase_s", {})[name] = round(time.perf_counter() - started, 4)

    def _each(self, fn, budget: bool = False, baseline_first: bool = False) -> None:
        """``fn(backend)`` for every backend in turn (``baseline_first``: the baseline before the
        kernel's backends); a first-use tuning candidate's failure drops it
        (:meth:`gemmlab.run.first_use.Tuning.step`; ``budget``: one after the first is not reached
        once ``tune_budget_s`` is spent) instead of failing the point."""
        order = list(self.backends)
        if baseline_first:
            order.sort(key=lambda b: b.role != "baseline")  # stable: the others keep their order
        for backend in order:
            if self.tuning is not None and self.tuning.holds(backend):
                self.tuning.step(self, backend, fn, budget)
            else:
                fn(backend)

    def _tuned(self, winner) -> None:
        """First-use tuning chose ``winner`` (now the ``kernel`` backend): the config (a sanitizer
        child runs it), the record's kernel, precision text and ratio follow it."""
        self.cfg = {**self.cfg, "kernel": {"name": winner.name, **winner.params}}
        self.record["kernel"] = {"name": winner.name, "params": winner.params,
                                 "plugin": self.tuning.origins.get(winner.name), "backend": winner.kind}
        self.record["precision"] = record_stage.precision_text(self.rc.precision,
                                                               getattr(winner.spec, "tf32_rounding", None))
        _ratio(self.record, self.backends, "graph" if self.rc.timing.mode == "both" else self.rc.timing.mode)
        _merge(self.record, self.backends)

    # --- phases ---------------------------------------------------------------------------------
    def validate(self) -> None:
        """Parse the config, build the backends, describe the point, run every static check."""
        registry = registry_for(self.cfg)
        self.cfg, dispatch = resolve_auto(self.cfg, registry, self.out_dir, run_point)  # kernel=auto -> its choice
        if dispatch is not None:
            self.record["dispatch"] = dispatch
            self.tuning = first_use.Tuning.plan(dispatch)  # the model's top candidates, timed in this run
        rc = self.rc = parse_config(self.cfg, defaults_of=lambda name: registry.get(name).defaults,
                                    values_of=lambda name: registry.get(name).param_values,
                                    origin_of=registry.origins.get)
        self.backends = (self.tuning.backends(registry) if self.tuning is not None
                         else [backend_for("kernel", rc.kernel, registry.get(rc.kernel), rc.params)])
        if rc.baseline is not None:
            base = registry.get(rc.baseline)
            self.backends.append(backend_for("baseline", rc.baseline, base, dict(base.defaults)))
        flops = self.problem.flops  # a grouped GEMM's: sum_g 2 M_g N_g K_g
        self.record.update(kernel={"name": rc.kernel, "params": rc.params, "plugin": registry.origins[rc.kernel],
                                   "backend": self.backends[0].kind},
                           shape=rc.shape._asdict(), flops=flops, mode=rc.mode,
                           precision=record_stage.precision_text(
                               rc.precision, getattr(self.backends[0].spec, "tf32_rounding", None)),
                           layout={"a": rc.layout_a, "b": rc.layout_b})
        if rc.grouped is not None:
            self.record["grouped"] = rc.grouped.record()
        if self.problem.extended:  # issue 43: what is computed beyond A·B, and how the matrices are stored
            ep = self.problem.epilogue
            self.record["epilogue"] = {"operation": verify_fused.describe(self.problem), "out": self.problem.out,
                                       **(ep.record() if ep is not None else {}),
                                       "ld": {"a": self.problem.lda, "b": self.problem.ldb, "c": self.problem.ldc},
                                       "batch_strides": {m.lower(): self.problem.batch_stride(m) for m in "ABC"}}
        from gemmlab.gpu.device import offline_facts
        self._each(lambda b: b.validate(self.problem, offline_facts(rc.arch or "90")))  # before the GPU opens
        for backend in list(self.backends):
            missing = backend.unavailable()
            if missing is None:
                continue
            if self.tuning is not None and self.tuning.holds(backend):
                self.tuning.drop(self, backend, UnavailableError(f"kernel: {missing}"))
                continue
            if rc.mode == "compile" and backend.role == "baseline":  # nothing of it to compile: noted, skipped
                self.backends.remove(backend)
                self.record["baseline"] = {"name": backend.name, "params": backend.params,
                                           "skipped": f"not available ({missing}); not needed for mode=compile"}
                continue
            raise UnavailableError(f"{backend.role}: {missing}")  # the field: kernel= or baseline=
        if rc.sanitizer and rc.mode == "compile":  # compute-sanitizer runs the kernel: noted, skipped
            self.record["sanitizer"] = {"tool": rc.sanitizer,
                                        "skipped": "it runs the kernel, so it needs mode=run; not run for mode=compile"}

    def compile_only(self) -> None:
        """``mode=compile``: compile for ``arch`` (default sm_90) with offline device facts."""
        from gemmlab.gpu.device import offline_facts
        facts = offline_facts(self.rc.arch or "90")
        self.record["device"] = {"name": facts.name, "arch": f"sm_{facts.arch}"}
        for backend in self.backends:
            backend.compile(self.problem, facts, facts.arch, self.out_dir, self.rc.cache_enabled, self.rc.cache_dir)
            backend.estimate_occupancy(facts)
        _merge(self.record, self.backends)
        self.record.succeed("compiled")

    def open_device(self) -> None:
        from gemmlab.gpu.device import open_gpu, pick_device
        rc = self.rc
        self.gpu = open_gpu(pick_device() if rc.device == "auto" else rc.device)
        facts = self.gpu.facts
        self.record["device"] = self.gpu.record()
        if rc.arch is not None and rc.arch.rstrip("af") != facts.arch:
            raise ConfigError("arch", f"mode=run builds for the device's own arch sm_{facts.arch}; "
                              f"got sm_{rc.arch} (use mode=compile to build for another target)")
        self._each(lambda b: b.validate(self.problem, facts))

    def compile(self) -> None:
        driver = str(self.record["device"].get("driver_version", "none"))
        arch = self.rc.arch or self.gpu.facts.arch

        def build(backend) -> None:
            try:
                backend.compile(self.problem, self.gpu.facts, arch, self.out_dir, self.rc.cache_enabled,
                                self.rc.cache_dir, driver_version=driver)
            except CompileError as exc:
                if self.tuning is not None and self.tuning.holds(backend):  # the point's own log is run_point's
                    store.write_artifact(self.out_dir, f"compile-{backend.role}.log", exc.log)
                raise
            refused = backend.missing_instructions()  # a declared SASS class absent: nothing is launched
            if refused:
                _merge(self.record, self.backends)
                if not (self.tuning is not None and self.tuning.holds(backend)):
                    self.record.fire("instruction classes")
                raise SafetyNetError("missing_instructions", refused)

        self._each(build, budget=True)  # first-use tuning: a candidate after the first waits for the budget

    def allocate(self) -> None:
        """Inputs drawn, rounded to the storage type, laid out and uploaded; each backend's C
        allocated and its launch prepared."""
        rc, problem, gpu = self.rc, self.problem, self.gpu
        started = time.perf_counter()
        if rc.inputs.draw != "host" and device_check.applies(problem, min_mnk=0 if rc.inputs.draw == "device" else None):
            self._allocate_on_device(started)
            return
        self.inputs = inputs_stage.make_problem_inputs(problem, rc.inputs)
        # the float64 references: shared with the previous point when its logical inputs were these very
        # (read-only, kept) arrays, e.g. a shape's row- and column-major B of one precision (issue 41)
        self.products = verify_stage.products_for(self.inputs.a, self.inputs.b)
        self.record.setdefault("phase_s", {})["allocate_parts"] = {"draw": round(time.perf_counter() - started, 4)}
        inp = self.inputs
        self.record["inputs"] = self._inputs_record(inp.a_stored.shape, inp.b_stored.shape,
                                                    "drawn as float32, rounded once")
        if rc.inputs.draw != "host":  # asked for the device, drawn here: say why
            self.record["inputs"].update(drawn="host", drawn_why=(
                f"inputs.draw={rc.inputs.draw}: the device check handles plain fp32/tf32/bf16/fp16 problems"
                + (f" above M*N*K = {device_check.DEVICE_MIN_MNK}" if rc.inputs.draw == "auto" else "")))
        self.d_a = guards.allocate(gpu, "A", inp.a_stored.shape, inp.a_stored)
        self.owned.append(self.d_a)
        self.d_b = guards.allocate(gpu, "B", inp.b_stored.shape, inp.b_stored)
        self.owned.append(self.d_b)
        if inp.a_scale is not None:  # fp8 (issue 42): the scale buffers, inputs like A and B
            self.d_scales = (guards.allocate(gpu, "A_scale", inp.a_scale.shape, inp.a_scale),
                             guards.allocate(gpu, "B_scale", inp.b_scale.shape, inp.b_scale))
            self.owned.extend(self.d_scales)
            self.record["inputs"].update(dtype={"A": problem.a_dtype, "B": problem.b_dtype},
                                         quantisation=inp.quantisation)
            self.record["inputs"].pop("rounding", None)
        if problem.grouped is not None:  # issue 44: the group arrays, inputs like A and B
            self.d_groups = tuple((guards.allocate(gpu, name, host.shape, host), host)
                                  for name, host in problem.grouped.arrays().items())
            self.owned.extend(g for g, _ in self.d_groups)
        if problem.extended:  # issue 43: C0 and the bias, inputs like A and B; A, B (and C) with their padding
            self.d_epilogue = tuple((guards.allocate(gpu, name, host.shape, host), host) for name, host in
                                    (("C0", inp.c0_stored), ("bias", inp.bias_stored)) if host is not None)
            self.owned.extend(g for g, _ in self.d_epilogue)
            self.record["inputs"]["stored"].update({g.name: list(g.shape) for g, _ in self.d_epilogue},
                                                   C=list(problem.stored_shape("C")))
            self.record["inputs"]["padding"] = ("elements of a buffer outside every batch's matrix (past each row's "
                                                "tight length, between batches) hold NaN (inputs) or keep the NaN "
                                                "fill (C); both are checked untouched")
        self._prepare_outputs()

    def _prepare_outputs(self) -> None:
        """Each backend's C allocated (guard-banded) and its launch prepared on the point's inputs."""
        gpu, problem = self.gpu, self.problem
        groups = {g.name: g for g, _ in self.d_groups}
        epilogue = {g.name.lower(): g for g, _ in self.d_epilogue}
        c_dtype = inputs_stage.c_storage_dtype(problem)

        def prepare(backend) -> None:
            c = guards.allocate(gpu, f"C ({backend.name})", problem.stored_shape("C"), dtype=c_dtype)
            self.owned.append(c)
            backend.buffers = Buffers(self.d_a, self.d_b, c, *self.d_scales, groups=groups, **epilogue)
            backend.prepare(gpu, problem, backend.buffers)

        self._each(prepare)

    def _allocate_on_device(self, started: float) -> None:
        """``inputs.draw`` on the device (:class:`~gemmlab.stages.inputs.InputOptions`): A and B
        allocated guard-banded and filled there by the device check's generator from
        ``inputs.seed`` (:meth:`gemmlab.stages.device_check.DeviceCheck.draw`, which snapshots them);
        no host copy and no float64 product here (the checks run on the device)."""
        rc, problem, gpu = self.rc, self.problem, self.gpu
        self.checker = device_check.DeviceCheck(
            gpu, problem, device_check.roundings_for(problem.precision, [b.spec.tf32_rounding for b in self.backends]),
            rc.inputs.distribution, rc.cache_enabled, rc.cache_dir,
            driver_version=str(self.record["device"].get("driver_version", "none")))
        dtype = inputs_stage.storage_dtype(problem.precision)
        self.d_a = guards.allocate(gpu, "A", problem.stored_shape("A"), dtype=dtype)
        self.owned.append(self.d_a)
        self.d_b = guards.allocate(gpu, "B", problem.stored_shape("B"), dtype=dtype)
        self.owned.append(self.d_b)
        self.inputs = self.checker.draw(self.d_a, self.d_b, rc.inputs.seed, rc.inputs.distribution)
        self.owned.extend(self.inputs.owned)
        gpu.sync()
        self.products = {}
        self.record.setdefault("phase_s", {})["allocate_parts"] = {"draw": round(time.perf_counter() - started, 4)}
        self.record["inputs"] = {**self._inputs_record(self.d_a.shape, self.d_b.shape, "rounded once on the device"),
                                 "drawn": "device", "generator": device_check.GENERATOR,
                                 "device_check_compile": self.checker.compile_record}
        self._prepare_outputs()

    def _inputs_record(self, stored_a, stored_b, how: str) -> dict:
        """The record's ``inputs``: distribution, seed, type, layouts, logical and stored shapes; below
        float32, ``rounding`` (``how`` the values reached the storage type)."""
        rc, problem = self.rc, self.problem
        out = {"distribution": rc.inputs.distribution, "seed": rc.inputs.seed, "dtype": problem.ab_dtype,
               "layout": _layout_text(problem), "A": [rc.shape.M, rc.shape.K], "B": [rc.shape.K, rc.shape.N],
               "stored": {"A": list(stored_a), "B": list(stored_b)}}
        if problem.ab_dtype != "float32":
            out["rounding"] = (f"{how} to {problem.ab_dtype} (round to nearest even); the reference multiplies the "
                               "rounded values")
        return out

    def _verify_output(self, backend, c_host=None, options=None):
        """The verdict on ``backend``'s C for the point's inputs: on the device where the inputs were
        drawn there (:attr:`checker`), else :func:`_verify` of ``c_host`` (C as read; read here when None)."""
        rc = self.rc
        options = options or rc.verify
        if self.checker is not None:
            return self.checker.check(backend.buffers.c, self.inputs, options, rc.inputs.distribution,
                                      rc.inputs.seed, products=self.products, tf32_rounding=backend.spec.tf32_rounding)
        if c_host is None:
            c_host = guards.read(self.gpu, backend.buffers.c)
        return _verify(c_host, self.inputs, self.problem, rc, options, rc.inputs.seed, self.products, backend)

    def _inputs_unchanged(self) -> None:
        """The inputs-unchanged net: on the device against the snapshots where the inputs were drawn
        there, else :func:`_check_inputs` against the host's arrays (every input buffer)."""
        if self.checker is not None:
            self.inputs.check_unchanged(self.record)
        else:
            _check_inputs(self.gpu, self.record, self.d_a, self.d_b, self.inputs, self.d_scales,
                          self.d_groups + self.d_epilogue)

    def correctness(self) -> None:
        """NaN-fill each backend's own C, one launch (its whole plan), verify, check the bands."""
        gpu, record = self.gpu, self.record

        def launch_and_verify(backend) -> None:
            c = backend.buffers.c
            guards.nan_fill(gpu, c)  # never reuse another output
            backend.enqueue()
            gpu.sync()
            self.outputs[backend.role] = guards.read(gpu, c)  # the repeat-stability net's reference
            started = time.perf_counter()
            verdict = self._verify_output(backend, self.outputs[backend.role])
            parts = record.setdefault("phase_s", {}).setdefault("correctness_parts", {})
            parts["verify"] = round(parts.get("verify", 0.0) + time.perf_counter() - started, 4)  # the float64 check
            backend.record["verification"] = verdict.record()
            if self.checker is not None:  # inputs.draw on the device: checked there (the host holds no inputs)
                backend.record["verification"].update(where="device", inputs=device_check.GENERATOR)
            _merge(record, self.backends)
            # every net looks before any verdict is raised, so the record says all that fired
            hit = _bands(gpu, record, [c, self.d_a, self.d_b, *self.d_scales, *(g for g, _ in self.d_groups),
                                       *(g for g, _ in self.d_epilogue), *backend.guarded()],
                         after="the correctness launch")
            fired = (["guard bands"] if hit else []) + (
                [] if verdict.passed else ["verification (NaN outputs: unwritten, or a guard canary read)"
                                            if verdict.nan_outputs else "verification"])
            candidate = self.tuning is not None and self.tuning.holds(backend)
            if candidate:  # its nets are its own (dispatch.tuning.tried), not the point's
                self.tuning.entry(backend)["nets_fired"] = fired
            else:
                record.looked(fired)
            if hit:
                if candidate:  # the next candidate's check starts from clean bands
                    guards.restore_bands(gpu, c, self.d_a, self.d_b, *self.d_scales, *(g for g, _ in self.d_groups),
                                         *(g for g, _ in self.d_epilogue), *backend.guarded())
                raise SafetyNetError("out_of_bounds", f"{hit['message']} (after the correctness launch)"
                                     + ("" if verdict.passed else f"; also {verdict.summary()}"))
            if not verdict.passed:
                raise VerificationError(f"wrong result from {backend.name}: {verdict.summary()}")
            if candidate:
                self.tuning.verified(backend)

        running = list(self.backends)
        # with first-use tuning the baseline first: its verdict is on the inputs as drawn, before any
        # candidate could write them (a candidate that does is found and dropped below, not the point)
        self._each(launch_and_verify, baseline_first=self.tuning is not None)
        if self.tuning is not None:
            record.fire()
            if self._inputs_blame(running):  # a candidate wrote the inputs: the others' verdicts again, on clean ones
                self._each(launch_and_verify)
                self._inputs_unchanged()

    def _inputs_blame(self, running: list) -> bool:
        """First-use tuning: A and B (and the other inputs) still hold what was uploaded after every
        candidate's correctness launch (False); if not (True), the candidates dropped in this
        correctness pass are back in the running (``running``: the backends at its start; their
        verdicts may have been on written inputs), each backend is launched again alone on inputs
        uploaded again, each candidate that writes them is dropped (``inputs_modified``; a baseline
        that does fails the point), and the inputs and their guard bands are written again: the
        caller runs the correctness launches again."""
        gpu, extra = self.gpu, self.d_groups + self.d_epilogue

        def check() -> None:
            self._inputs_unchanged()

        def upload() -> None:
            if self.checker is not None:  # drawn on the device: written again from the snapshots
                self.inputs.restore()
                gpu.sync()
                return
            for g, host in [(self.d_a, self.inputs.a_stored), (self.d_b, self.inputs.b_stored), *extra,
                            *zip(self.d_scales, (getattr(self.inputs, "a_scale", None),
                                                 getattr(self.inputs, "b_scale", None)))]:
                if host is not None:
                    gpu.upload(g.address, host)
            gpu.sync()

        try:
            check()
            return False
        except SafetyNetError:
            pass
        for backend in running:
            if backend not in self.backends:
                self.tuning.revive(self, backend)

        def alone(backend) -> None:
            upload()
            guards.nan_fill(gpu, backend.buffers.c)
            backend.enqueue()
            gpu.sync()
            check()

        self._each(alone)
        upload()
        guards.restore_bands(gpu, self.d_a, self.d_b, *self.d_scales, *(g for g, _ in extra))
        return True

    def launch_paths(self) -> None:
        """Library kernels enqueue their own work: each one's enqueue is captured once into a CUDA
        graph on the run's stream (global capture mode), the graph's nodes must all be device work
        (:data:`DEVICE_NODES`, at least one kernel), and the graph replayed on a NaN-filled C must
        verify against the correctness launch's inputs. Work enqueued on another stream or in
        another thread, a host function, a copy from or to host memory, or a synchronisation
        escapes or breaks the capture, and once the replay has completed on the run's stream the
        whole context must be idle (a worker left spinning on another stream is not): status
        ``foreign_launch`` (net "launch path"). A problem with no work (a grouped GEMM whose groups
        are all empty: no FLOP, issue 44) may capture no node at all (``no_work`` in the record):
        nothing to compute is an honest enqueue; its replay is verified and the context checked idle as any other."""
        gpu = self.gpu
        idle_cost = None
        for backend in self.backends:
            if backend.kind != "library":
                continue
            if idle_cost is None:  # what waiting for an idle context costs by itself (the host's call)
                idle_cost = timing_stage.time_device_sync(gpu)
            try:
                replay = gpu.capture(backend.enqueue, 1, mode="global")
                nodes = gpu.graph_nodes(replay.graph)
            except GemmlabError as exc:
                raise SafetyNetError("foreign_launch", f"launch path: {backend.name}'s enqueue cannot be captured on "
                                     f"the run's stream ({exc}); its work is not all device work on that stream") from None
            foreign = sorted({n for n in nodes if n not in DEVICE_NODES})
            check = {"captured_nodes": {n: nodes.count(n) for n in sorted(set(nodes))}}
            backend.record["launch_path"] = check
            # a problem with no work (a grouped GEMM whose groups are all empty, issue 44) may enqueue nothing
            idle = not nodes and self.problem.flops == 0
            if idle:
                check["no_work"] = True
            if foreign or ("kernel" not in nodes and not idle):
                gpu.release_graphs()
                _merge(self.record, self.backends)
                what = f"foreign nodes {', '.join(foreign)}" if foreign else "no kernel on the run's stream"
                raise SafetyNetError("foreign_launch", f"launch path: {backend.name}'s captured enqueue has {what} "
                                     f"(nodes: {check['captured_nodes']}); only device work on the run's stream is timed")
            c = backend.buffers.c
            guards.nan_fill(gpu, c)
            replay()
            gpu.sync()
            gpu.release_graphs()
            verdict = self._verify_output(backend)
            check["replay_verified"] = verdict.passed
            # the replay has completed on the run's stream: the context must have nothing else running
            busy = timing_stage.time_device_sync(gpu) - idle_cost
            looks = [busy]
            while busy > BUSY_AFTER_REPLAY_MS and len(looks) < BUSY_LOOKS:
                # replayed again, looked at again: a host thread descheduled under load (one 6.03 ms wait
                # with 14 test processes on the H100 host's 16 cores, session 31) is not there twice; work
                # the enqueue leaves on another stream is there after every replay
                again = gpu.capture(backend.enqueue, 1, mode="global")
                again()
                gpu.sync()
                gpu.release_graphs()
                busy = timing_stage.time_device_sync(gpu) - idle_cost
                looks.append(busy)
            check["context_busy_after_ms"] = busy
            if len(looks) > 1:
                check["context_busy_looks_ms"] = looks
            _merge(self.record, self.backends)
            if not verdict.passed:
                raise SafetyNetError("foreign_launch", f"launch path: {backend.name}'s captured enqueue, replayed, does "
                                     f"not compute C ({verdict.summary()}): its work runs outside the run's stream")
            if busy > BUSY_AFTER_REPLAY_MS:
                raise SafetyNetError("foreign_launch", f"launch path: {backend.name}: its context still had work "
                                     f"{busy:.4g} ms after its replayed enqueue completed on the run's stream (more "
                                     f"than {BUSY_AFTER_REPLAY_MS} ms): work it left running on another stream")

    def time(self) -> None:
        gpu, rc = self.gpu, self.rc
        floor = _floor_enqueue(gpu) if rc.timing.floor else None
        flush = _flush_fn(gpu, rc.timing.flush) if rc.timing.l2 == "cold" else None
        idle = frozenset(b.role for b in self.backends if b.kind == "library")  # every sample, every protocol
        started = time.perf_counter()
        options = rc.timing
        if self.tuning is not None:  # the candidates whose estimated sampling fits the tuning budget's time left
            left = self.tuning.fit_budget(self, lambda b: timing_stage.time_once(gpu, b.enqueue),
                                          first_use.launches(options))
            options = dataclasses.replace(options, budget_s=min(left, options.budget_s or left))
        measured = timing_stage.measure(gpu, {b.role: b.enqueue for b in self.backends}, options,
                                        flush=flush, floor_enqueue=floor, replay=True, idle_check=idle)
        self.replay = measured["replay"]
        _record_timing(self.record, self.backends, measured, rc, self.record["flops"], gpu)
        self.record.setdefault("phase_s", {})["timing"] = round(time.perf_counter() - started, 4)

    def _novelty(self, fresh) -> list[tuple[Any, str]]:
        """Fresh-input timing: one launch on inputs the kernel has never seen against a launch on
        the same inputs uploaded again (each launch right after the same upload of A, so both
        start from the same idle gap, clocks and L2 contents: on the H100 a decode-shape cuBLAS
        launch right after an upload took 0.096 ms against 0.019 ms for the next, back to back),
        for each backend. A kernel that answers inputs it has seen from
        a cache of results (a stash keyed by their values) is fast only on the second; an honest
        one takes about the same time for both. Two sets are tried ((-A, B), then (2A, -B): values
        no launch has seen); the point is refused only when both show the first launch
        slower than :data:`NOVELTY_RATIO` x the second + :data:`NOVELTY_SLACK_MS`; and a kernel whose
        every launch on these new inputs is slower than :data:`NOVELTY_RATIO` x its timed median +
        :data:`NOVELTY_MEDIAN_SLACK_MS` (fast only on the inputs it was timed on: a cache of their results alone)
        is refused too. Returns
        ``(backend, the refusal's one line)`` for each backend refused (empty: none). The inputs left in the buffers are recorded as checked
        (inputs unchanged is checked against them). Fresh inputs drawn on the device
        (:class:`gemmlab.stages.device_check.DeviceInputs`) are scaled there instead of uploaded, and
        the pass over A (scaled by 1) stands for the second upload."""
        gpu, rc = self.gpu, self.rc
        suspects = list(self.backends)
        on_device = isinstance(fresh, device_check.DeviceInputs)
        lead = _spin_enqueue(gpu)
        problem = self.problem
        # new inputs drawn from new seeds (a multiple of inputs the kernel has seen is not new to it: a stash
        # answers -A as -C); FP8, grouped and fused problems on the host keep the scaled variants
        drawn = on_device or (problem.precision in device_check.PRECISIONS and problem.grouped is None
                              and not problem.extended)
        seeds: list = []
        if not on_device:
            a_st, b_st, a, b = fresh.a_stored, fresh.b_stored, fresh.a, fresh.b
        seen: dict = {}
        rounds = 0
        for round_ in (1, 2):
            rounds = round_
            if drawn:
                seeds.append(secrets.randbits(62))
            if on_device:
                fresh.redraw(seeds[-1])
            elif drawn:
                new = inputs_stage.make_problem_inputs(problem, inputs_stage.InputOptions(
                    seed=seeds[-1], distribution=rc.inputs.distribution), fast=True)
                a_st, b_st, a, b = new.a_stored, new.b_stored, new.a, new.b
                gpu.upload(self.d_b.address, b_st)
            elif round_ == 1:  # (-A, B), then (2A, -B): values no launch has seen, exact in every storage type
                a_st, a = -a_st, -a
            else:
                # FP8 A (one byte) is halved instead: doubling E4M3 overflows its 448 to NaN
                f = -0.5 if a_st.dtype.itemsize == 1 else -2
                a_st, a = (f * a_st).astype(a_st.dtype), f * a
                b_st, b = -b_st, -b
                gpu.upload(self.d_b.address, b_st)
            if not on_device:
                gpu.upload(self.d_a.address, a_st)
            flagged = []
            for backend in suspects:
                times = []
                for _ in range(2):  # the first launch on these values, then one on the same values uploaded again
                    if times:  # the same upload before both: the same idle gap, clocks and L2 state
                        fresh.touch_a() if on_device else gpu.upload(self.d_a.address, a_st)
                    guards.nan_fill(gpu, backend.buffers.c)
                    times.append(timing_stage.time_once(gpu, backend.enqueue, lead=lead))
                seen.setdefault(backend.role, []).append(times)
                if times[0] > NOVELTY_RATIO * times[1] + NOVELTY_SLACK_MS:
                    flagged.append(backend)
            suspects = flagged
            if not suspects:
                break
        for backend in self.backends:
            backend.record["fresh_input_timing_ms"] = seen.get(backend.role, [])
        self.record["fresh_input_timing_inputs"] = ({"how": "drawn", "seeds": seeds} if drawn else
                                                    {"how": "scaled", "factors": ["-A, B", "2A, -B"][:rounds]})
        _merge(self.record, self.backends)
        if on_device:
            fresh.check_unchanged(self.record)
        else:
            _check_inputs(gpu, self.record, self.d_a, self.d_b,
                          inputs_stage.ProblemInputs(a=a, b=b, a_stored=a_st, b_stored=b_st))
        refused = []
        for backend in suspects:
            (f1, s1), (f2, s2) = seen[backend.role][:2]
            refused.append((backend, (
                f"fresh-input timing: {backend.name}: a launch on inputs it had not seen took {f1:.4g} and {f2:.4g} "
                f"ms, the next launch on the same inputs {s1:.4g} and {s2:.4g} ms (more than {NOVELTY_RATIO:g}x + "
                f"{NOVELTY_SLACK_MS} ms): its timed median of {backend.record['timing']['median_ms']:.4g} ms measures "
                "results cached from inputs it has seen, not the work")))
        # a cache of the timed inputs' results alone: every launch on other inputs slower than the median
        for backend in self.backends:
            if any(b is backend for b, _ in refused) or not seen.get(backend.role):
                continue
            fastest = min(t for pair in seen[backend.role] for t in pair)
            median = backend.record["timing"]["median_ms"]
            if fastest > NOVELTY_RATIO * median + NOVELTY_MEDIAN_SLACK_MS:
                refused.append((backend, (
                    f"fresh-input timing: {backend.name}: every launch on inputs other than the timed ones took at "
                    f"least {fastest:.4g} ms, more than {NOVELTY_RATIO:g}x its timed median of {median:.4g} ms + "
                    f"{NOVELTY_MEDIAN_SLACK_MS} ms: the median measures results cached for the timed inputs, not the work")))
        return refused

    def after_timing(self) -> None:
        """Verify what was timed, and the plausibility gate (docs/trust.md).

        Fresh inputs (a new, unpredictable seed, recorded; float32 draws of the same
        distribution) are written into the same A and B buffers; each backend's C is NaN-filled
        and its workspace refilled with the canary it held before its first launch; the path that
        was timed runs once more (the graph of the primary protocol's batch, replayed; or the same
        batch of direct launches) and its output is verified against a float64 reference of the
        new inputs by the rule of the first verification: every element while M·N·K <=
        :data:`AFTER_TIMING_FULL_MAX` (or with ``verify.method=full``), else the sampled method
        (whole rows and columns chosen by the new seed, and Freivalds' check of the whole product).
        Then the guard bands and the new inputs are checked, the library kernels' context-idle gaps
        after each sample (:data:`IDLE_GAP_MS`), and each median against the precision's compute
        floor and the memory floor (:func:`gemmlab.stages.roofline.plausibility`). A net that fires
        withholds the figures (moved under ``withheld``) and fails the point:
        ``wrong_after_timing``, ``cached_result`` (:meth:`_novelty`), ``foreign_launch`` or
        ``implausible``, in that order.

        Above :data:`gemmlab.stages.device_check.DEVICE_MIN_MNK` (fp32/tf32/bf16/fp16, a plain
        problem) the fresh inputs are drawn on the device, C is checked there by the same rule and
        samples, and the inputs-unchanged and fresh-input timing nets work on device copies
        (:mod:`gemmlab.stages.device_check`; the record's ``where``): no matrix crosses PCIe.
        """
        gpu, rc, record, problem = self.gpu, self.rc, self.record, self.problem
        started = time.perf_counter()
        parts: dict = {}

        def lap(name: str) -> None:  # where the after-timing seconds go: phase_s.after_timing_parts
            now = time.perf_counter()
            parts[name] = round(now - started - sum(parts.values()), 4)

        seed = secrets.randbits(62)
        # verify.after_timing=auto: a large problem is drawn, verified and checked on the device (no matrix
        # crosses PCIe: device_check); =device: at every size the device path allows; =host (default): here
        where = rc.verify.after_timing
        on_device = where != "host" and device_check.applies(problem, self.d_a, self.d_b,
                                                             min_mnk=0 if where == "device" else None)
        if on_device:
            checker = device_check.DeviceCheck(
                gpu, problem, device_check.roundings_for(problem.precision, [b.spec.tf32_rounding for b in self.backends]),
                rc.inputs.distribution, rc.cache_enabled, rc.cache_dir,
                driver_version=str(record["device"].get("driver_version", "none")))
            lap("compile")
            if self.checker is not None:  # the point's own inputs' snapshots are done with: their memory first
                first = {id(snap) for snap in self.inputs.owned}
                guards.release(*(o for o in self.owned if id(o) in first))
                self.owned = [o for o in self.owned if id(o) not in first]
            fresh = checker.draw(self.d_a, self.d_b, seed, rc.inputs.distribution)
            self.owned.extend(fresh.owned)
            gpu.sync()
        else:
            fresh = inputs_stage.make_problem_inputs(problem, inputs_stage.InputOptions(
                seed=seed, distribution=rc.inputs.distribution), fast=True)
        lap("draw")
        options = rc.verify  # the first verification's rule; its method too, while the product is small
        if rc.shape.M * rc.shape.N * rc.shape.K > AFTER_TIMING_FULL_MAX and rc.verify.method != "full":
            options = dataclasses.replace(rc.verify, method="sampled")
        if not on_device:
            gpu.upload(self.d_a.address, fresh.a_stored)
            gpu.upload(self.d_b.address, fresh.b_stored)
            for g, host in zip(self.d_scales, (fresh.a_scale, fresh.b_scale)):  # fp8: the fresh inputs' own scales
                gpu.upload(g.address, host)
            for g, _ in self.d_epilogue:  # issue 43: the fresh C0 and bias
                gpu.upload(g.address, fresh.c0_stored if g.name == "C0" else fresh.bias_stored)
            lap("upload")
        products: dict = {}
        failures, refusals = [], []
        path = ("the graph of one timed batch, replayed" if rc.timing.mode != "events"
                else f"one batch of {rc.timing.launches_per_sample} direct launches, as timed")
        for backend in self.backends:
            c = backend.buffers.c
            guards.nan_fill(gpu, c)
            for ws in backend.guarded():
                gpu.fill32(ws.base + guards.GUARD_BYTES, guards.CANARY, -(-ws.nbytes // 4))
            self.replay[backend.role]()
            gpu.sync()
            if on_device:
                verdict = checker.check(c, fresh, options, rc.inputs.distribution, seed, products=products,
                                        tf32_rounding=backend.spec.tf32_rounding)
            else:
                verdict = _verify(guards.read(gpu, c), fresh, problem, rc, options, seed, products, backend)
            backend.record["verification_after_timing"] = {
                **verdict.record(), "inputs_seed": seed, "path": path, "where": "device" if on_device else "host",
                **({"inputs": device_check.GENERATOR} if on_device else {})}
            if not verdict.passed:
                failures.append((backend, f"{backend.name}: {verdict.summary()}"))
        gpu.release_graphs()
        self.replay = {}
        lap("replay_verify")
        _merge(record, self.backends)
        hit = _bands(gpu, record, [self.d_a, self.d_b, *self.d_scales, *(g for g, _ in self.d_epilogue)]
                     + [b.buffers.c for b in self.backends]
                     + [g for b in self.backends for g in b.guarded()], after="the after-timing verification")
        if hit:
            record.fire("guard bands")
            raise SafetyNetError("out_of_bounds", f"{hit['message']} (after the after-timing verification)")
        if on_device:
            fresh.check_unchanged(record)
        else:
            _check_inputs(gpu, record, self.d_a, self.d_b, fresh, self.d_scales,
                          tuple((g, fresh.c0_stored if g.name == "C0" else fresh.bias_stored) for g, _ in self.d_epilogue))
        lap("bands_inputs")
        cached = self._novelty(fresh)
        lap("fresh_input_timing")
        refusals += [("cached_result", "fresh-input timing", message, backend) for backend, message in cached]
        primary = "graph" if rc.timing.mode == "both" else rc.timing.mode
        floor_gaps = (record.get("launch_floor") or {}).get(primary, {}).get("idle_gaps_ms") or [0.0]
        for backend in self.backends:
            gaps = backend.record["timing"].get("idle_gaps_ms")
            if gaps:
                excess = statistics.median(gaps) - statistics.median(floor_gaps)
                backend.record["timing"]["idle_gap_excess_ms"] = excess
                allowed = IDLE_GAP_MS + IDLE_GAP_SHARE * backend.record["timing"]["median_ms"]
                if excess > allowed:
                    refusals.append(("foreign_launch", "launch path", (
                        f"launch path: {backend.name}: its context still had work a median {excess:.4g} ms after "
                        f"each stop event (more than {allowed:.4g} ms beyond the empty kernel's): work on "
                        f"another stream escaped the timed interval of {backend.record['timing']['median_ms']:.4g} ms"),
                                     backend))
        for backend in self.backends:
            t = backend.record["timing"]
            clock = t.get("max_sm_mhz") or (record.get("device") or {}).get("max_sm_mhz")
            gate = plausibility(rc.shape.M, rc.shape.N, rc.shape.K, t["median_ms"], gpu.facts.sm_count,
                                gpu.facts.arch, clock, gpu.dram_bytes_per_s(), problem.ab_bytes, rc.precision,
                                rc.timing.l2, gpu.facts.l2_bytes, traffic=problem.traffic)
            backend.record["plausibility"] = gate
            if not gate["passed"]:
                refusals.append(("implausible", "plausibility", f"plausibility: {backend.name}: {gate['reason']}",
                                 backend))
        if rc.timing.shared == "refuse":
            for backend in self.backends:
                procs = backend.record["timing"].get("max_compute_processes") or 0
                if procs > 1:
                    refusals.append(("shared_gpu", "shared GPU", (
                        f"shared GPU: {procs} processes held a compute context on the GPU while {backend.name} was "
                        "timed: its figure is not this kernel's alone (timing.shared=allow records it anyway)"), None))
                    break
        lap("gates")
        record.setdefault("phase_s", {})["after_timing"] = round(time.perf_counter() - started, 4)
        record["phase_s"]["after_timing_parts"] = parts
        _merge(record, self.backends)

        def wrong(which) -> SafetyNetError:
            return SafetyNetError("wrong_after_timing", "verification after timing: wrong result on fresh inputs "
                                  f"(seed {seed}, {path}) from " + "; ".join(m for _, m in which) + "; figure withheld")

        if self.tuning is not None:  # a candidate a net refused leaves the point; the others go on
            for backend in self.tuning.candidates(self):
                mine = [f for f in failures if f[0] is backend]
                theirs = [r for r in refusals if r[3] is backend]
                if mine or theirs:
                    first = min(theirs, key=lambda r: REFUSAL_ORDER.index(r[0])) if theirs else None
                    self.tuning.drop(self, backend, wrong(mine) if mine else SafetyNetError(first[0], first[2]))
            failures = [f for f in failures if not self.tuning.holds(f[0])]
            refusals = [r for r in refusals if r[3] is None or not self.tuning.holds(r[3])]
        nets = list(dict.fromkeys((["verification after timing"] if failures else []) + [r[1] for r in refusals]))
        if not nets:
            return
        record.fire(*nets)
        _withhold(record, self.backends, nets[0])
        if failures:
            raise wrong(failures)
        status, _, message, _ = min(refusals, key=lambda r: REFUSAL_ORDER.index(r[0]))
        raise SafetyNetError(status, message + "; figure withheld")

    def safety_nets(self) -> None:
        """After timing: bands, inputs, repeat stability (bitwise); a first-use tuning candidate's own
        bands (its C, its workspace) or instability drop it (inputs written fail the point: they
        were shared)."""
        gpu, record = self.gpu, self.record
        _check_bands(gpu, record, [self.d_a, self.d_b, *self.d_scales, *(g for g, _ in self.d_groups),
                                   *(g for g, _ in self.d_epilogue)], after="timing")

        def own_bands(backend) -> None:
            if self.tuning is not None and self.tuning.holds(backend):
                hit = _bands(gpu, {}, [backend.buffers.c, *backend.guarded()], after="timing")
                if hit:
                    raise SafetyNetError("out_of_bounds", f"{hit['message']} (after timing)")
            else:
                _check_bands(gpu, record, [backend.buffers.c, *backend.guarded()], after="timing")

        self._each(own_bands)
        self._inputs_unchanged()

        def stable(backend) -> None:
            last = guards.read(gpu, backend.buffers.c)
            first = self.outputs[backend.role]
            word = np.dtype(f"u{last.dtype.itemsize}")  # bitwise, per element of C's own type (float32, bf16)
            same = np.array_equal(last.view(word), first.view(word))
            backend.record["repeat_stable"] = bool(same)
            if not same:
                diff = int((last.view(word) != first.view(word)).sum())
                _merge(record, self.backends)
                raise SafetyNetError("unstable", f"{backend.name}: the last timed launch differs bitwise from the "
                                     f"correctness launch in {diff} element(s): likely a race")

        self._each(stable)
        _merge(record, self.backends)

    def sanitize(self) -> None:
        rc = self.rc
        if not rc.sanitizer:
            return
        from gemmlab.stages import sanitizer
        result = sanitizer.run(rc.sanitizer, self.cfg, self.out_dir, device=self.gpu.index)
        self.record["sanitizer"] = result
        if result["verdict"] == "unavailable":
            raise UnavailableError(f"sanitizer={rc.sanitizer}: {result['message']}")
        if result["verdict"] != "clean":
            raise SafetyNetError("sanitizer_errors", f"compute-sanitizer {rc.sanitizer}: {result['verdict']}"
                                 f" ({result.get('counts') or str(result.get('errors')) + ' errors'}; "
                                 f"report {result.get('report')})")

    def release(self) -> None:
        if self.replay and self.gpu is not None:
            self.gpu.release_graphs()
            self.replay = {}
        if self.tuning is not None:  # the candidates that left the point
            self.tuning.release()
        for backend in self.backends:
            backend.close()
        guards.release(*self.owned)
        self.owned = []


def _layout_text(problem: Problem) -> str:
    """``row-major`` for row/row (the v1 text), else which operand is column-major."""
    if (problem.layout_a, problem.layout_b) == ("row", "row"):
        return "row-major"
    return f"A {problem.layout_a}-major, B {problem.layout_b}-major, C row-major"


def _floor_enqueue(gpu):
    compiled = compile_stage.compile_kernel(timing_stage.floor_source(), timing_stage.FLOOR_ENTRY,
                                            compile_stage.CompileOptions(arch=gpu.facts.arch), disassemble=False)
    loaded = gpu.load(compiled.object_code, compiled.name_expression, 0)
    return gpu.launcher(loaded, Launch(grid=(1, 1, 1), block=(32, 1, 1)), ())


def _spin_enqueue(gpu, ns: int = timing_stage.SPIN_NS):
    """An enqueue of kernels/spin.cu's one-thread kernel, busy for ``ns`` nanoseconds: the lead of
    a single-launch timing (:func:`gemmlab.stages.timing.time_once`)."""
    compiled = compile_stage.compile_kernel(timing_stage.SPIN_SOURCE, timing_stage.SPIN_ENTRY,
                                            compile_stage.CompileOptions(arch=gpu.facts.arch), disassemble=False)
    loaded = gpu.load(compiled.object_code, compiled.name_expression, 0)
    return gpu.launcher(loaded, Launch(grid=(1, 1, 1), block=(32, 1, 1)), (np.uint64(ns),))


def _flush_fn(gpu, how: str = "read"):
    """L2 flush over a scratch buffer of 2x the L2 size (allocated once per process): ``write``
    memsets it with a new word each time; ``read`` fills it once (one word, so the read kernel's
    XOR never reaches its store) and reads it with ``gemmlab_l2_read`` (kernels/l2_flush.cu)."""
    nbytes = max(2 * gpu.facts.l2_bytes, 1 << 20)
    if getattr(gpu, "_flush_buffer", None) is None:
        gpu._flush_buffer = gpu.allocate(nbytes)
        gpu._flush_sink = gpu.allocate(256)
        gpu.fill32(int(gpu._flush_buffer.handle), 0x5A5A5A5A, nbytes // 4)
    address, words = int(gpu._flush_buffer.handle), nbytes // 4
    if how == "read":
        compiled = compile_stage.compile_kernel(timing_stage.FLUSH_SOURCE, timing_stage.FLUSH_ENTRY,
                                                compile_stage.CompileOptions(arch=gpu.facts.arch), disassemble=False)
        loaded = gpu.load(compiled.object_code, compiled.name_expression, 0)
        launch = Launch(grid=(4 * gpu.facts.sm_count, 1, 1), block=(256, 1, 1))
        return gpu.launcher(loaded, launch, (gpu._flush_buffer, np.int64(nbytes // 16), gpu._flush_sink))
    counter = [0]

    def flush():
        counter[0] += 1
        gpu.fill32(address, 0x5A5A5A5A ^ counter[0], words)

    return flush


def _bands(gpu, record, matrices, after: str) -> dict | None:
    """Check the guard bands of ``matrices``; record and return the first hit (None: intact)."""
    for g in matrices:
        hit = guards.check_bands(gpu, g)
        if hit:
            record["guard_bands"] = [dict(hit, after=after)]
            return hit
    record["guard_bands"] = "intact"
    return None


def _check_bands(gpu, record, matrices, after: str) -> None:
    hit = _bands(gpu, record, matrices, after)
    if hit:
        record.fire("guard bands")
        raise SafetyNetError("out_of_bounds", f"{hit['message']} (after {after})")


def _activation_error(problem: Problem, backend) -> float | None:
    """The c the backend's kernel declares for its activation's float32 evaluation
    (:func:`gemmlab.contract.epilogue.activation_error`), or None where it declares none (libm's)."""
    ep, support = problem.epilogue, backend.spec.epilogue
    act = ep.activation if ep is not None else "none"
    return activation_error(support, act) if act in dict(support.activation_error) else None


def _verify(c, inputs, problem: Problem, rc: RunConfig, options, seed: int, products: dict, backend):
    """The verdict on ``c`` (a backend's C buffer as read) for ``inputs``: the fused check of an
    extended problem (issue 43, :func:`gemmlab.stages.verify_fused.check`), else
    :func:`gemmlab.stages.verify.check` (``products``: float64 products shared by the backends)."""
    if problem.extended:
        return verify_fused.check(c, inputs, problem, options, rc.inputs.distribution, seed,
                                  tf32_rounding=backend.spec.tf32_rounding,
                                  rounds_before=backend.spec.epilogue.rounds_before_epilogue,
                                  activation_error=_activation_error(problem, backend))
    return verify_stage.check(c, inputs.a, inputs.b, options, rc.inputs.distribution, rc.precision, seed,
                              products=products, tf32_rounding=backend.spec.tf32_rounding,
                              fp8=_fp8_bound(problem, backend), grouped=problem.grouped)


def _fp8_bound(problem: Problem, backend) -> verify_stage.Fp8Bound | None:
    """What the fp8 bound needs of a backend (its declared accumulation) and the problem (C's type);
    None for other precisions."""
    if problem.precision != "fp8":
        return None
    return verify_stage.Fp8Bound(getattr(backend.spec, "fp8_accumulation", None), problem.c_dtype)


def _check_inputs(gpu, record, d_a, d_b, inputs, scales: tuple = (), groups: tuple = ()) -> None:
    """The inputs on the device still hold what was uploaded (A, B and, for fp8, the scale
    buffers ``scales`` when ``inputs`` has them; a grouped GEMM's group arrays, ``groups``: pairs
    of buffer and host array): a kernel that writes an input fails the point."""
    pairs = [(d_a, inputs.a_stored), (d_b, inputs.b_stored), *groups]
    if scales and getattr(inputs, "a_scale", None) is not None:
        pairs += list(zip(scales, (inputs.a_scale, inputs.b_scale)))
    for g, host in pairs:
        now = guards.read(gpu, g)
        if not hostpass.same_bytes(now, host):  # np.array_equal of the bytes, in threads (issue 41)
            item = host.dtype.itemsize
            changed = int((now.view(np.uint8).reshape(-1, item) != host.view(np.uint8).reshape(-1, item))
                          .any(axis=1).sum())
            record["inputs_unchanged"] = False
            raise SafetyNetError("inputs_modified", f"the kernel wrote its input {g.name}: {changed} element(s) changed")
    record["inputs_unchanged"] = True


def _record_timing(record, cands, measured, rc: RunConfig, flops: int, gpu) -> None:
    protocols = rc.timing.protocols
    primary = "graph" if rc.timing.mode == "both" else rc.timing.mode
    floor = {p: s.record(flops) for p, s in measured["floor"].items()}
    for cand in cands:
        per = {p: measured["protocols"][p][cand.role].record(flops) for p in protocols}
        t = dict(per[primary])
        t.update(protocol=primary, protocols=per, description=timing_stage.describe(rc.timing),
                 warmup=rc.timing.warmup, repeat=len(t["samples_ms"]), min_repeat=rc.timing.repeat,
                 batch=rc.timing.launches_per_sample, l2=rc.timing.l2, stopped_by=measured["stopped_by"],
                 launch_floor_ms={p: f["median_ms"] for p, f in floor.items()})
        if rc.timing.l2 == "cold":
            t["flush"] = rc.timing.flush
        if rc.timing.mode == "both":
            t["host_overhead_per_launch_ms"] = per["events"]["median_ms"] - per["graph"]["median_ms"]
        if primary in floor and floor[primary]["median_ms"] > 0:  # a zero floor (clock resolution) gives no ratio
            t["median_over_floor"] = t["median_ms"] / floor[primary]["median_ms"]
            t["launch_bound"] = t["median_over_floor"] < 2.0
        cand.record["timing"] = t
        sm_mhz = t.get("median_sm_mhz")
        cand.record["roofline"] = roofline(rc.shape.M, rc.shape.N, rc.shape.K, t["median_ms"], gpu.facts.sm_count,
                                           gpu.facts.arch, sm_mhz, gpu.dram_bytes_per_s(),
                                           ab_bytes=rc.problem.ab_bytes, precision=rc.precision, l2=rc.timing.l2,
                                           l2_bytes=gpu.facts.l2_bytes, traffic=rc.problem.traffic)
    if floor:
        record["launch_floor"] = floor
    if gpu.monitor.error:
        record["telemetry_error"] = gpu.monitor.error
    _ratio(record, cands, primary)
    _merge(record, cands)


def _ratio(record, cands, primary: str) -> None:
    """``ratio_to_baseline`` of the kernel's timing to the baseline's (both timed), else nothing."""
    roles = {c.role: c.record.get("timing") for c in cands}
    k, bl = roles.get("kernel"), roles.get("baseline")
    if k and bl:
        record["ratio_to_baseline"] = {"baseline": next(c.name for c in cands if c.role == "baseline"),
                                       "protocol": primary, "median_time": k["median_ms"] / bl["median_ms"],
                                       # None: no work (a grouped GEMM whose groups are all empty, issue 44)
                                       "gflops": k["gflops"] / bl["gflops"] if bl["gflops"] else None}


#: node kinds a library kernel's captured enqueue may hold (:meth:`Run.launch_paths`): device work
DEVICE_NODES = frozenset({"kernel", "memset", "memcpy device->device", "empty", "event record", "event wait",
                          "mem alloc", "mem free"})
#: how far beyond the empty kernel's device-idle gap (median, ms: the host time of cuCtxSynchronize
#: after the stop event completed) a library kernel's may reach before the work it left on other
#: streams is refused (the call itself takes a few microseconds; other processes' work is not waited for)
IDLE_GAP_MS = 0.05
#: ... plus this share of the library kernel's median: the host's wake-up after a long wait is
#: slower (cuBLAS SGEMM at 16384x2048x4096, median 5.6 ms, honest: a median gap 0.050 ms beyond the
#: floor's on the H100, session 31); work hidden on another stream is the gap's size per launch, so a
#: hidden share under this one moves the figure by less than it
IDLE_GAP_SHARE = 0.02
#: the largest M·N·K whose after-timing verification compares every element (2^33: 2048^3); above
#: it, rows and columns drawn from the new seed plus Freivalds' check (float64 products of the whole
#: problem cost seconds a point at 4096^3: 57-71% of the rest of the point on the H100 host, call 1)
AFTER_TIMING_FULL_MAX = 2**33
#: fresh-input timing (:meth:`Run._novelty`): a first launch on unseen inputs slower than this many
#: times the next launch on the same inputs, plus the slack (single-launch event timing's noise, and
#: another process's kernel time-sliced in), twice, is a cache of results
NOVELTY_RATIO = 2.0
NOVELTY_SLACK_MS = 0.05
#: its second rule (a cache of the timed inputs' results alone): every fresh launch slower than
#: NOVELTY_RATIO x the timed median + this. A launch on fresh inputs costs up to ~0.12 ms more than the
#: timed median by itself (1,556 honest H100 records of sessions 30-35 in docs/results, nearly all graph
#: timing with warm L2: at most 2.23x a 0.063 ms median, 1.60x from 0.1 ms, 1.20x from 0.3 ms); with
#: this slack the most any of them reached is 62% of the threshold (80% with NOVELTY_SLACK_MS)
NOVELTY_MEDIAN_SLACK_MS = 0.1
#: the order in which the nets after timing name the point's status
REFUSAL_ORDER = ("cached_result", "foreign_launch", "implausible", "shared_gpu")
#: how long the context may still be busy (host time of one cuCtxSynchronize beyond an idle one's)
#: once a library kernel's replayed enqueue has completed on the run's stream: a single host-timed
#: call, so the margin covers the host's own noise (0.11 ms seen for a no-op under a 2-core test
#: run); a worker left spinning on another stream holds it for its whole life
BUSY_AFTER_REPLAY_MS = 5.0
#: replays looked at before the context's busy time after one refuses the point (each a new replay)
BUSY_LOOKS = 3
#: the figures a refused point withholds (moved under ``withheld``), per backend and at the top level
WITHHELD = ("timing", "roofline")


def _withhold(record: dict, cands: list, net: str) -> None:
    """Move every backend's timing figures (and the ratio) under ``withheld`` (with the net that
    fired): a refused point's figure is never where a report reads a measurement."""
    held: dict = {"net": net}
    for cand in cands:
        part = {k: cand.record.pop(k) for k in WITHHELD if k in cand.record}
        if cand.role == "kernel":
            for k in WITHHELD:
                record.pop(k, None)
            held.update(part)
        elif cand.role == "baseline":  # first-use tuning's candidates: their entries in dispatch.tuning.tried
            held["baseline"] = part
            if isinstance(record.get("baseline"), dict):
                for k in WITHHELD:
                    record["baseline"].pop(k, None)
    if "ratio_to_baseline" in record:
        held["ratio_to_baseline"] = record.pop("ratio_to_baseline")
    record["withheld"] = held


def _merge(record: dict, cands: list) -> None:
    """The kernel's fields go to the top level; the baseline's under ``baseline``; first-use tuning's
    candidates (roles ``candidate<i>``) nowhere until one becomes the kernel."""
    for cand in cands:
        if cand.role == "kernel":
            record.update(cand.record)
        elif cand.role == "baseline":
            record["baseline"] = {"name": cand.name, "params": cand.params, **cand.record}
