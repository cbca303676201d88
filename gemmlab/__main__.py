"""``python -m gemmlab`` is the ``gemmlab`` command."""

from gemmlab.cli.app import main

if __name__ == "__main__":  # a multiprocessing server importing this module must not run the CLI
    main()
