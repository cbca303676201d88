"""The active-session slot: which session's copy of a piece of shared state the code running now uses.

A command's points share a few things that are costly to make or must be held once: the kernel
registries (:mod:`gemmlab.contract.registry`), the compile memo (:mod:`gemmlab.gpu.compile`), the
GPUs and their locks (:mod:`gemmlab.gpu.device`) and the point worker process
(:mod:`gemmlab.run.isolation`). The session, :class:`gemmlab.run.session.Session`, owns one of
each; outside any session (a plugin test, a notebook, the worker process's own points) the
*default session's* is used. Each of those modules keeps one :class:`SessionSlot`: the default
session's object, and a :class:`contextvars.ContextVar` naming the active session's while its
points run (``Session.active()`` enters each module's ``using``). Not a container of state
itself: one object a slot, never a channel between functions (tests/test_record_model.py).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")

_UNSET = object()


class SessionSlot(Generic[T]):
    """The default session's object of one kind, and the active session's while a
    :meth:`using` block runs.

    Args:
        name: the ContextVar's name, the module's dotted name and what it holds
            (``"gemmlab.gpu.compile.memo"``).
        default: the default session's object, made once at import (one a process; a forked
            child shares the parent's, as a module global would be).
        default_factory: instead of ``default``: makes the default session's object on first
            use, once a process id (a forked child's first call makes its own: a point worker
            pipe or an atexit hook belongs to the process that made it).

    Raises:
        TypeError: neither or both of ``default`` and ``default_factory`` given.
    """

    def __init__(self, name: str, default: T = _UNSET, default_factory: Callable[[], T] | None = None):
        if (default is _UNSET) == (default_factory is None):
            raise TypeError(f"SessionSlot {name!r}: give exactly one of default and default_factory")
        self.name = name
        self._factory = default_factory
        self._default: tuple[int | None, T] | None = None if default_factory else (None, default)
        self._active: ContextVar[T | None] = ContextVar(name, default=None)

    def default(self) -> T:
        """The default session's object (made by ``default_factory`` on this process's first call)."""
        made = self._default
        if self._factory is not None and (made is None or made[0] != os.getpid()):
            made = self._default = (os.getpid(), self._factory())
        return made[1]

    def get(self) -> T:
        """The active session's object: the one of the innermost :meth:`using` block of this
        context, else the default session's."""
        held = self._active.get()
        return self.default() if held is None else held

    @contextmanager
    def using(self, held: T) -> Iterator[T]:
        """Inside the block (this thread or task and what it awaits), :meth:`get` returns ``held``;
        the slot before the block is back after it, also when the block raises."""
        token = self._active.set(held)
        try:
            yield held
        finally:
            self._active.reset(token)
