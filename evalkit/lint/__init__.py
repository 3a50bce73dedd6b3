"""`evalkit lint`: the faults in a benchmark's data that would silently distort a score (docs/lint.md).

Modules: model (finding kinds, severities, the report), items (how an item is seen: its views,
place, kind, images), content (text, option and gold checks), images, balance, protocol
(per-benchmark checks), cache (the full result by data fingerprint), engine (lenient load + every
check), runs (the cheap checks at the start of `evalkit run`, lint.json), command (the CLI).
"""

from __future__ import annotations

from evalkit.lint.runs import LintSummary, lint_at_start, lint_for_run

__all__ = ["LintSummary", "lint_at_start", "lint_for_run"]
