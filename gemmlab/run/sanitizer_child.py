"""The child process of the sanitizer stage: one point, timing off, under compute-sanitizer.

``python -m gemmlab.run.sanitizer_child CONFIG.json OUT_DIR`` runs :func:`gemmlab.run.pipeline.run_point`
with ``check_only=True`` (compile, NaN fill, one launch, verification) and exits 0 when the point
was checked, 1 otherwise. :func:`gemmlab.stages.sanitizer.run` starts it; it lives here, in
the run layer, because it runs the pipeline, which the stages below must not import.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    """Child entry: ``python -m gemmlab.run.sanitizer_child CONFIG.json OUT_DIR`` (timing off)."""
    from gemmlab.run.pipeline import run_point
    cfg = json.loads(Path(sys.argv[1]).read_text())
    record = run_point(cfg, Path(sys.argv[2]), check_only=True)
    sys.exit(0 if record["status"] in ("ok", "checked") else 1)


if __name__ == "__main__":
    main()
