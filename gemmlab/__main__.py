"""``python -m gemmlab`` is the ``gemmlab`` command."""

from gemmlab.cli import main

main()
