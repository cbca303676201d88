"""``python -m gemmlab`` is the ``gemmlab`` command."""

from gemmlab.cli.app import main
from gemmlab.console import settled_exit

if __name__ == "__main__":  # a multiprocessing server importing this module must not run the CLI
    with settled_exit():
        main()
