"""Layer 4, dispatch: which kernel and parameters to run for a shape (``kernel=auto``).

``auto`` (the tuning table, the rules and the choice, resolved per point before anything
compiles; building a table from sweep records), ``candidates`` (the checked, named candidates the
kernels' declared parameter spaces offer for a problem, issue 41), ``shapes`` (the shape suite of real GEMM
shapes by family) and ``shapeset`` (the public shape set with its fixed train/test split, generated
by ``make_shapeset``). Imports the layers below; the tuning sweep that *measures* candidates runs the
pipeline, so it lives above, in ``gemmlab.cli.tune``.
"""
