"""Layer 6, the results tools: read ``result.json`` records and turn them into tables and plots.

``report`` (``gemmlab-report``, with ``report_tables``, ``report_plots``, ``report_html``),
``compare`` (``gemmlab-compare``, with ``compare_match``, ``compare_stats``, ``compare_render``),
``families`` (per-family view of a shape-suite run) and ``summary`` (a sweep's summary). They read
records only through ``gemmlab.stages.record_model`` and never run a kernel; each builds its tables
in the one table model, ``table``, whose printers write Markdown, CSV, HTML and the terminal.
"""
