"""gemmlab.cli.hydra_errors: Hydra's errors as one line (the command-line cases that reach it
through the ``gemmlab`` command are in tests/test_cli_acceptance.py and tests/test_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_a_bug_in_gemmlab_is_not_turned_into_a_hydra_error():
    """Only Hydra's and OmegaConf's errors become one line; an exception raised by gemmlab's own
    code (a bug) stays a traceback."""
    from hydra.errors import MissingConfigException

    from gemmlab.cli.hydra_errors import hydra_error
    try:
        raise ValueError("a bug")
    except ValueError as exc:
        assert hydra_error(exc) is None
    err = hydra_error(MissingConfigException("In 'hydra/config': Could not find 'hydra/launcher/x'",
                                             missing_cfg_file="hydra/launcher/x", options=["basic", "joblib"]))
    assert str(err) == "hydra/launcher: unknown option 'x'; available: basic, joblib"


@pytest.mark.parametrize("args, missing, want", [
    (["-m", "hydra/launcher=gemmlab_local"], "hydra/launcher/submitit_local",
     "hydra/launcher: gemmlab_local needs the submitit launcher, which is not installed: pip install 'gemmlab[cluster]'"),
    (["-m", "hydra/launcher=gemmlab_gpus"], "hydra/launcher/joblib",
     "hydra/launcher: gemmlab_gpus needs the joblib launcher, which is not installed: pip install 'gemmlab[cluster]'"),
    (["-m", "hydra/launcher=gemmlab_slurm"], "hydra/launcher/submitit_slurm",
     "hydra/launcher: gemmlab_slurm needs the submitit launcher"),
    (["experiment=optuna_tiled"], "hydra/sweeper/optuna",
     "hydra/sweeper: experiment=optuna_tiled needs the Optuna sweeper, which is not installed: "
     "pip install 'gemmlab[search]'"),
])
def test_a_missing_launcher_or_sweeper_names_the_extra(args, missing, want):
    """Without the optional extras Hydra only knows the plugin option is missing ('available:
    none'); the line names what the user chose and the pip extra (pyproject's cluster/search)."""
    from hydra.errors import MissingConfigException

    from gemmlab.cli.hydra_errors import hydra_error
    err = hydra_error(MissingConfigException(f"Could not find '{missing}'", missing_cfg_file=missing, options=[]),
                      args)
    assert str(err).startswith(want), str(err)
    extras = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert "cluster = [" in extras and "search = [" in extras


@pytest.mark.parametrize("text, hint", [
    ("hydra.run.dir=out/é", "'hydra.run.dir=\"out/é\"'"),
    ("kernel=naive,tiled€", "'kernel=\"naive\",\"tiled€\"'"),  # a sweep's elements are quoted each: still a sweep
    ("hydra.run.dir=~/runs", None),  # quoted, ~ would be a folder named ~, not the home folder
    ("hydra.run.dir='out/é", None),  # a quote of its own: Hydra's error as it is
])
def test_a_value_the_grammar_takes_only_quoted_gets_the_quoting_hint(text, hint):
    """Issue 45: a non-ASCII value (``hydra.run.dir=out/é``) got Hydra's lexer error without the
    quoting hint a path with a space gets; the line now says how to quote it, one line still."""
    from gemmlab.cli.hydra_errors import override_parse_error
    message = str(override_parse_error(text, None, None, Exception(f"LexerNoViableAltException: {text}")))
    assert "\n" not in message and message.count(f"LexerNoViableAltException: {text}") == 1
    if hint is None:
        assert "quoted" not in message
    else:
        assert message.endswith(f"is quoted for Hydra and the whole override for the shell: {hint})"), message
