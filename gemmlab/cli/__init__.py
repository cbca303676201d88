"""Layer 7, the command line: the ``gemmlab`` Hydra app and the ``gemmlab-tune`` command.

``app`` (``gemmlab``: compose the config, run each point, exit status), ``sweep`` (the Hydra
callbacks of a multirun: progress and the end-of-sweep summary) and ``tune`` (``gemmlab-tune``:
the candidate sweep over the shape suite, and building, showing and querying kernel=auto's
table). The top layer: nothing in gemmlab imports it except ``gemmlab.__main__``.
"""
