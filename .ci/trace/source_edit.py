"""The text edit the trace patches make on a diagnostic copy of kernels/wgmma_bf16.cu: each
replacement asserts that its anchor occurs exactly as often as expected, so an edit of the kernel
that moves an anchor stops the patch loudly instead of tracing something else."""
from __future__ import annotations

import sys
from pathlib import Path


class SourceEdit:
    """The source of ``path`` (default: the first command-line argument), edited in memory by
    :meth:`rep` and written back by :meth:`save`."""

    def __init__(self, path: str | None = None):
        self.path = Path(path or sys.argv[1])
        self.text = self.path.read_text()

    def rep(self, old: str, new: str, count: int = 1) -> None:
        """Replace ``old`` by ``new``; AssertionError unless ``old`` occurs ``count`` times."""
        assert self.text.count(old) == count, (old, self.text.count(old))
        self.text = self.text.replace(old, new)

    def block(self, first: str, last: str) -> str:
        """The unique text from ``first`` through ``last`` (both included)."""
        assert self.text.count(first) == 1, first
        start = self.text.index(first)
        return self.text[start:self.text.index(last, start) + len(last)]

    def save(self) -> None:
        self.path.write_text(self.text)
