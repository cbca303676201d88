"""Errors gemmlab reports as one line (field, what is allowed) with a non-zero exit status."""


class GemmlabError(Exception):
    """Base class: an error whose message is a complete one-line explanation for the user."""

    status = "error"


class ConfigError(GemmlabError):
    """Invalid configuration: ``field`` names the config field, the message says what is allowed."""

    status = "invalid"

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


class NoGPUError(GemmlabError):
    """No CUDA driver or device: the run cannot proceed (``mode=compile`` still works)."""

    status = "no_gpu"


class CompileError(GemmlabError):
    """NVRTC rejected the kernel source; ``log`` holds the full NVRTC log with line numbers."""

    status = "compile_error"

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


class CudaError(GemmlabError):
    """A CUDA driver call failed while running a kernel (launch failure, illegal address ...)."""

    status = "cuda_error"


class VerificationError(GemmlabError):
    """The kernel's output does not match the float64 reference."""

    status = "wrong_result"


class SafetyNetError(GemmlabError):
    """A safety net fired: ``status`` is ``out_of_bounds`` (guard bands), ``inputs_modified``,
    ``unstable`` (repeat launches differ bitwise), ``sanitizer_errors``, ``missing_instructions``
    (a SASS class the kernel declares is absent from its main kernel: ``gemmlab.gpu.sass_check``),
    ``wrong_after_timing`` (the timed path's output on fresh inputs fails verification),
    ``cached_result`` (a launch on unseen inputs is much slower than the next on the same ones),
    ``foreign_launch`` (a library kernel's work escapes the run's stream), ``implausible``
    (faster than the precision's peak or the memory floor: ``gemmlab.stages.roofline``) or
    ``shared_gpu`` (another process held a compute context on the GPU during timing, with
    ``timing.shared=refuse``)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


class UnavailableError(GemmlabError):
    """An optional component (e.g. nvmath-python for the cublas kernel) is not installed."""

    status = "unavailable"


class WatchdogTimeout(GemmlabError):
    """A point ran longer than ``isolation.timeout_s``: its worker process (and the hung kernel's
    CUDA context with it) was killed by the watchdog."""

    status = "timeout"


class WorkerDied(GemmlabError):
    """A point's worker process ended (signal, ``os._exit``, a crash in native code) before it
    returned a record."""

    status = "crashed"


def in_chain(exc: BaseException | None, kind: type, limit: int = 20) -> BaseException | None:
    """The first exception of type ``kind`` among ``exc`` and the ones it was raised from or while
    handling (``__cause__``, else ``__context__``), at most ``limit`` deep; None if none."""
    seen = 0
    while exc is not None and seen < limit:
        if isinstance(exc, kind):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def was_interrupted(exc: BaseException | None) -> bool:
    """``exc`` is a KeyboardInterrupt or was raised while handling one (:func:`in_chain`): a
    library's clean-up that failed on the state Ctrl-C left half-built (seen in OmegaConf:
    ``'NoneType' object has no attribute '_invalidate_flags_cache'``). Such an error is the
    interrupt, not bad input."""
    return in_chain(exc, KeyboardInterrupt) is not None


class Terminated(KeyboardInterrupt):
    """SIGTERM (e.g. Slurm's time limit, ``kill``) turned into an interrupt (:func:`raise_terminated`):
    a command stops as on Ctrl-C (a sweep's point worker is killed, finished points keep their
    records), says so in one line and exits 143 (128 + SIGTERM)."""


def raise_terminated(signum, frame) -> None:
    """SIGTERM handler (``signal.signal(signal.SIGTERM, raise_terminated)``): raise :class:`Terminated`."""
    raise Terminated()
