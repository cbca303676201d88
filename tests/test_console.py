"""gemmlab.console: the base layer's command start and interrupt handling (run_command)."""

from __future__ import annotations

import pytest

from gemmlab import console


def _interrupted():
    raise KeyboardInterrupt


def test_run_command_asks_a_callable_advice_at_the_interrupt(capsys):
    """gemmlab's own resume line depends on the sweep it was running when the interrupt came; a
    callable advice is asked then (a string stays as it is, and the interrupt's own text wins)."""
    asked = []

    def advice():
        asked.append(True)
        return "finished points keep their result.json"

    with pytest.raises(SystemExit) as stop:
        console.run_command("cmd", _interrupted, advice=advice)
    assert stop.value.code == 130 and asked == [True]
    assert capsys.readouterr().err == "cmd: interrupted; finished points keep their result.json\n"
    with pytest.raises(SystemExit):
        console.run_command("cmd", _interrupted, advice="kept")
    assert capsys.readouterr().err == "cmd: interrupted; kept\n"

    def says_its_own():
        raise KeyboardInterrupt("nothing was written")

    with pytest.raises(SystemExit):
        console.run_command("cmd", says_its_own, advice=advice)
    assert capsys.readouterr().err == "cmd: interrupted; nothing was written\n" and asked == [True]


def test_run_command_returns_the_commands_status():
    assert console.run_command("cmd", lambda: 3) == 3
