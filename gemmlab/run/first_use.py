"""``kernel=auto``'s first-use tuning inside one point (issue 41, item 2): the k candidates
:func:`gemmlab.dispatch.tuning.choose_ranked` planned become backends of the point's own
:class:`gemmlab.run.pipeline.Run`, beside the baseline, so the inputs are drawn, uploaded and
given a float64 reference once, every candidate is verified against that reference and judged by
the same safety nets, and all are timed alternately by the point's protocol
(:func:`gemmlab.stages.timing.measure` over one dict of enqueues).

Roles ``candidate<i>`` (``i`` the model's rank, from 0) name them while they are in the running; a
candidate whose step fails (compile error, missing instruction class, wrong result, guard bands,
inputs written, repeat instability, wrong result after timing, fresh-input timing, plausibility;
:meth:`Tuning.drop`) leaves the point and its entry of ``dispatch.tuning.tried`` gets its status
and error: it never wins. A CUDA error is not survivable (the context is lost): the candidate's
entry says so and the point fails. When no candidate is left the point fails with the failure of
the model's first (the first dropped, in the model's order).

The budget ``tune_budget_s`` (seconds from the plan, in :meth:`Run.validate`): a candidate after the
first is not compiled once it is spent (``not_reached``), and before timing each candidate's
sampling time is estimated from one probe launch (:func:`gemmlab.stages.timing.time_once`) times
the launches the protocol makes; in the model's order, a candidate is kept when its estimate fits
the time left after those kept before it (the first always), else it is ``not_reached``; the
sampling loop's own ``budget_s`` is the time left (it still takes ``timing.repeat`` samples). After the nets the fastest survivor becomes the point's
``kernel`` (:func:`gemmlab.dispatch.tuning.finish`); the others are released. Verification after
timing, fresh-input timing and the plausibility gate run on every candidate timed (fresh inputs
and their reference drawn once), so their cost grows with k beside the timing's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from gemmlab.dispatch import tuning as tuning_plan
from gemmlab.errors import ConfigError, CudaError, GemmlabError
from gemmlab.gpu.backends import Backend, backend_for

ROLE = "candidate"
NOT_REACHED = "not_reached"


@dataclass
class Tuning:
    """First-use tuning of one point in flight.

    Attributes:
        dispatch: the point record's ``dispatch`` (its ``tuning.tried`` entries are filled in place).
        entries: ``dispatch["tuning"]["tried"]``, one per candidate in the model's order.
        budget_s: ``kernel.tune_budget_s`` (seconds).
        started: :func:`time.monotonic` when the point saw the plan.
        errors: the exception each dropped candidate failed with, by entry index.
        stopped_by: why candidates were not reached (None: every one was).
    """

    dispatch: dict
    entries: list
    budget_s: float
    started: float = field(default_factory=time.monotonic)
    errors: dict = field(default_factory=dict)
    origins: dict = field(default_factory=dict)
    stopped_by: str | None = None
    dropped: list = field(default_factory=list)

    @classmethod
    def plan(cls, dispatch: dict | None) -> "Tuning | None":
        """The tuning :func:`gemmlab.dispatch.tuning.choose_ranked` planned in ``dispatch``, or None."""
        entries = tuning_plan.planned(dispatch)
        if entries is None:
            return None
        return cls(dispatch, entries, float(dispatch["tuning"]["budget_s"]))

    def backends(self, registry) -> list[Backend]:
        """One backend per planned candidate, role ``candidate<i>``, in the model's order."""
        out = []
        for i, e in enumerate(self.entries):
            spec = registry.get(e["kernel"])
            self.origins[e["kernel"]] = registry.origins.get(e["kernel"])
            out.append(backend_for(f"{ROLE}{i}", e["kernel"], spec, {**dict(spec.defaults), **dict(e["params"])}))
        return out

    # --- who is in the running ------------------------------------------------------------------
    @staticmethod
    def holds(backend) -> bool:
        """True for a candidate backend (role ``candidate<i>``)."""
        return backend.role.startswith(ROLE)

    def entry(self, backend) -> dict:
        return self.entries[self.index(backend)]

    @staticmethod
    def index(backend) -> int:
        return int(backend.role[len(ROLE):])

    def candidates(self, run) -> list:
        return [b for b in run.backends if self.holds(b)]

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def spent(self, backend) -> bool:
        """The budget is spent and ``backend`` is not the model's first candidate."""
        return self.index(backend) > 0 and self.elapsed() >= self.budget_s

    def drop(self, run, backend, exc: BaseException | None, status: str | None = None) -> None:
        """Take ``backend`` out of the point: its entry gets ``status`` (the exception's, else the
        one given) and the one-line error (it is closed with the point: :meth:`release`). With no
        candidate left, the point fails with the model's first candidate's failure (re-raised)."""
        e = self.entry(backend)
        e["status"] = status or getattr(exc, "status", None) or ConfigError.status
        e["error"] = str(exc) if exc is not None else e.get("error")
        if e["status"] != NOT_REACHED:
            e["verified"] = bool(e.get("verified")) and e["status"] not in ("wrong_result", "wrong_after_timing")
            self.errors[self.index(backend)] = exc
        e["median_ms"] = None
        if backend in run.backends:
            run.backends.remove(backend)
            self.dropped.append(backend)
        if not self.candidates(run) and self.errors:
            first = self.errors[min(self.errors)]
            tuning_plan.finish(self.dispatch, self.elapsed(), self.stopped_by)
            raise first

    def revive(self, run, backend) -> None:
        """Put a dropped candidate back in the running (its entry as planned), in the model's order:
        its failure may have come from inputs another candidate wrote."""
        i = self.index(backend)
        self.entries[i].update(status="not_run", error=None, verified=False, median_ms=None)
        self.entries[i].pop("nets_fired", None)
        self.errors.pop(i, None)
        self.dropped.remove(backend)
        at = next((n for n, b in enumerate(run.backends) if not self.holds(b) or self.index(b) > i), len(run.backends))
        run.backends.insert(at, backend)

    def release(self) -> None:
        """Close the candidates that left the point (idempotent)."""
        for backend in self.dropped:
            backend.close()
        self.dropped = []

    def step(self, run, backend, fn: Callable[[Any], None], budget: bool = False) -> None:
        """``fn(backend)``; a candidate's failure (a :class:`GemmlabError` or a plugin's
        :class:`gemmlab.contract.hookspecs.ParamError`) drops it; ``budget``: a candidate after the
        first is not reached once the budget is spent. A CUDA error is recorded and raised."""
        from gemmlab.contract.hookspecs import ParamError
        if budget and self.spent(backend):
            self.stopped_by = (f"budget: {self.elapsed():.2f} s >= {self.budget_s:g} s after "
                               f"{self.index(backend)} candidates")
            self.entry(backend)["error"] = self.stopped_by
            self.drop(run, backend, None, NOT_REACHED)
            return
        try:
            fn(backend)
        except CudaError as exc:
            self.entry(backend).update(status=exc.status, error=str(exc))
            raise
        except ParamError as exc:
            self.drop(run, backend, ConfigError(exc.field, exc.message))
        except GemmlabError as exc:
            self.drop(run, backend, exc)

    def verified(self, backend) -> None:
        """The candidate's correctness launch passed verification."""
        self.entry(backend)["verified"] = True

    # --- the budget before timing ----------------------------------------------------------------
    def fit_budget(self, run, probe: Callable[[Any], float], launches: int) -> float:
        """In the model's order, keep each candidate whose sampling time (``probe(backend)``: ms of
        one launch, x ``launches``) fits the budget's time left after those kept before it (the
        first always); the others are ``not_reached``. Each entry gets ``probe_ms``. Returns the
        seconds left (for the sampling loop's ``budget_s``, at least 0)."""
        left = self.budget_s - self.elapsed()
        total = 0.0
        for backend in self.candidates(run):
            ms = probe(backend)
            cost = ms * launches / 1e3
            self.entry(backend)["probe_ms"] = round(ms, 6)
            if total > 0 and total + cost > left:
                self.stopped_by = (f"budget: sampling {backend.name} ({ms:.3g} ms x {launches} launches) would pass "
                                   f"the {max(left, 0):.3g} s left of {self.budget_s:g} s")
                self.entry(backend)["error"] = self.stopped_by
                self.drop(run, backend, None, NOT_REACHED)
                continue
            total += cost
        return max(left, 0.0)

    # --- the end ---------------------------------------------------------------------------------
    def finish(self, run):
        """After the nets: every candidate still in the point is ``ok`` with its median; the fastest
        becomes the point's ``kernel`` backend (returned), the others are closed and removed.

        Raises:
            the model's first candidate's failure, when none is left (:meth:`drop` raises it first).
        """
        survivors = self.candidates(run)
        for b in survivors:
            t = b.record.get("timing") or {}
            self.entry(b).update(status="ok", verified=True, error=None, median_ms=t.get("median_ms"),
                                 repeat=len(t.get("samples_ms") or []), rel_spread=t.get("rel_spread"))
        won = tuning_plan.finish(self.dispatch, self.elapsed(), self.stopped_by)
        winner = next(b for b in survivors if self.index(b) == won)
        for b in survivors:
            if b is not winner:
                run.backends.remove(b)
                self.dropped.append(b)
        winner.role = "kernel"
        run.backends.remove(winner)
        run.backends.insert(0, winner)
        return winner

    def store(self) -> None:
        """The point is ``ok``: its winner goes to the per-device cache."""
        tuning_plan.store_choice(self.dispatch)


def launches(options) -> int:
    """Launches one backend makes while :func:`gemmlab.stages.timing.measure` samples it by
    ``options`` (a :class:`gemmlab.stages.timing.TimingOptions`) at ``repeat`` samples: per
    protocol the warm-up, the graph's upload replay (``graph``) and the samples' batches."""
    per = options.launches_per_sample
    return sum(options.warmup + per * (options.repeat + (1 if p == "graph" else 0)) for p in options.protocols)
