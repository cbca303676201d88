"""Layer 4, dispatch: which kernel and parameters to run for a shape (``kernel=auto``).

``auto`` (the tuning table, the rules and the choice, resolved per point before anything
compiles; building a table from sweep records) and ``shapes`` (the shape suite of real GEMM
shapes by family). Imports the layers below; the tuning sweep that *measures* candidates runs the
pipeline, so it lives above, in ``gemmlab.cli.tune``.
"""
