"""Layer 5, the run: one experiment point end to end, in this process or a worker process.

``pipeline`` (validate -> compile -> inputs -> NaN-fill -> verify -> time -> record),
``isolation`` (the same point in a reused worker process with a watchdog) and
``sanitizer_child`` (the child process the sanitizer stage runs under compute-sanitizer).
Imports every layer below, none above.
"""
