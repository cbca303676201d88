"""gemmlab.contract.session_slot: the one "default session's object + active session's ContextVar"
slot the registry, the compile memo, the devices and the point runner keep (issue 45's session)."""

from __future__ import annotations

import threading

import pytest

from gemmlab.contract import session_slot
from gemmlab.contract.session_slot import SessionSlot


class Held:
    """A stand-in for a session's object (a memo, a runner)."""

    def __init__(self, tag: str):
        self.tag = tag


def test_get_is_the_default_outside_using_and_the_held_one_inside_nested_and_after_a_raise():
    default, a, b = Held("default"), Held("a"), Held("b")
    slot = SessionSlot("tests.slot", default=default)
    assert slot.get() is default and slot.default() is default
    with slot.using(a) as entered:
        assert entered is a and slot.get() is a and slot.default() is default
        with slot.using(b):
            assert slot.get() is b
        assert slot.get() is a
        with pytest.raises(RuntimeError), slot.using(b):
            raise RuntimeError("a point failed")
        assert slot.get() is a
    assert slot.get() is default


def test_another_thread_sees_the_default_not_this_ones_held():
    default, mine = Held("default"), Held("mine")
    slot = SessionSlot("tests.slot", default=default)
    seen = []
    with slot.using(mine):
        worker = threading.Thread(target=lambda: seen.append(slot.get()))
        worker.start()
        worker.join()
        assert slot.get() is mine
    assert seen == [default]


def test_a_default_factory_makes_one_object_a_process_id(monkeypatch):
    """isolation's default runner: made on first use, once a process; a forked child (another
    process id) makes its own on its first call."""
    made = []
    slot = SessionSlot("tests.slot", default_factory=lambda: made.append(Held(str(len(made)))) or made[-1])
    assert made == []  # nothing made before the first use
    first = slot.get()
    assert slot.default() is first and slot.get() is first and len(made) == 1
    monkeypatch.setattr(session_slot.os, "getpid", lambda: -1)  # as in a forked child
    child = slot.default()
    assert child is not first and slot.get() is child and len(made) == 2


def test_exactly_one_of_default_and_default_factory():
    with pytest.raises(TypeError, match="exactly one of default and default_factory"):
        SessionSlot("tests.slot")
    with pytest.raises(TypeError, match="exactly one of default and default_factory"):
        SessionSlot("tests.slot", default=Held("a"), default_factory=lambda: Held("b"))
    assert SessionSlot("tests.slot", default=None).default() is None  # None is a default like any other
