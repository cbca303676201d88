"""Layer 3, the run stages: each step of one experiment point, and the config that drives them.

``config`` (the schema and its validation, assembled from the stages' option classes), ``inputs``,
``verify``, ``timing``, ``sanitizer``, ``hostmem``, ``roofline``, ``record`` (writing
``result.json``) and ``record_model`` (the one record model every reader uses). A stage never
calls another stage's runner: ``gemmlab.run.pipeline`` strings them together. Imports only the
base, the contract and the GPU layer.
"""
