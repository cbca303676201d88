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
