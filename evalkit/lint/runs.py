"""Lint at the start of `evalkit run`: the cheap checks, or the stored full result, in lint.json.

The run has loaded its items strictly (a file the loader rejects never gets here), so what is
left to find is in the content: duplicate and contradictory questions, options, golds, image
files that are missing or empty. That costs a stat per image and no decoding. When `evalkit lint`
has checked the very same data (same files, sizes and times, same items: lint.cache), its full
result is used instead; the cheap result is kept the same way, so a re-run does not check again. Nothing here stops a run: the caller decides (`--strict`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.core.files import write_json_atomic
from evalkit.core.findings import Finding
from evalkit.core.types import Item
from evalkit.lint.model import LintReport, count_text, ordered, severity_counts

if TYPE_CHECKING:
    from evalkit.benchmarks.base import Benchmark

LINT_JSON = "lint.json"


@dataclass(frozen=True)
class LintSummary:
    """What a run reports of its data's lint: counts, one line, the error-level findings."""

    report: LintReport
    reused: str | None = None  # when the reused full result was made (None: cheap checks just now)
    categories: dict[str, str] = field(default_factory=dict, compare=False)  # item id -> category (for reports)

    @property
    def counts(self) -> dict[str, int]:
        return severity_counts(self.report.findings)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.report.findings if f.severity == "error")

    @property
    def line(self) -> str:
        """ "lint: 1 error, 2 warnings (cheap checks; `evalkit lint` runs all): see lint.json"."""
        how = (f"full check of {self.reused}" if self.reused else
               "cheap checks: text, options, gold, image files; `evalkit lint` runs them all")
        found = count_text(self.counts)
        return f"lint: {found} ({how})" + (": see lint.json" if self.report.findings else "")

    def affected(self, f: Finding) -> list[str]:
        """The categories (skills, dimensions) whose scores a finding's items count in."""
        return sorted({self.categories[i] for i in f.items if self.categories.get(i)})

    def to_summary(self) -> dict[str, Any]:
        """For summary.json: the counts, which checks, the file, and the errors in full with the
        categories whose scores they affect (a report lists them next to those scores)."""
        return {"counts": self.counts, "checks": self.report.checks, "reused": self.reused, "file": LINT_JSON,
                "errors": [{**f.to_dict(), "categories": self.affected(f)} for f in self.errors]}

    def write(self, run_dir: Path) -> Path:
        """run_dir/lint.json: every finding, most severe first."""
        path = Path(run_dir) / LINT_JSON
        write_json_atomic(path, {**self.report.to_dict(), "reused": self.reused})
        return path


def lint_at_start(bench: Benchmark | str, items: Sequence[Item], data: Path, cache_dir: Path | None) -> LintSummary:
    """The run's lint: the stored full result for this data and these items, else the cheap checks
    (nothing is written; see `lint_for_run`). `data` is the resolved data file or folder."""
    from evalkit.lint.cache import data_key, load_result, result_key, store_result
    from evalkit.lint.engine import check_items, data_root, relative

    name = bench if isinstance(bench, str) else bench.name
    categories = {it.id: it.category for it in items}
    key = None if cache_dir is None else result_key(name, data_key(Path(data), items), list(categories))
    if key is not None:
        found = load_result(cache_dir, key)
        if found is not None:
            return LintSummary(found[0], found[1] or "an earlier `evalkit lint`", categories)
        cheap = load_result(cache_dir, key, "cheap")  # the same command again: the same data, checked already
        if cheap is not None:
            return LintSummary(cheap[0], None, categories)
    findings, n_images = check_items(name, items, cheap=True)
    report = LintReport(name, str(data), tuple(ordered(relative(findings, data_root(Path(data))))), "cheap",
                        len(items), n_images)
    if key is not None:
        store_result(cache_dir, key, report)
    return LintSummary(report, None, categories)


def lint_for_run(bench: Benchmark | str, items: Sequence[Item], data: Path, run_dir: Path,
                 cache_dir: Path | None) -> LintSummary:
    """`lint_at_start`, written to run_dir/lint.json (the run directory must exist)."""
    summary = lint_at_start(bench, items, data, cache_dir)
    summary.write(run_dir)
    return summary


def read_lint(run_dir: Path) -> dict[str, Any] | None:
    """A run directory's lint.json, None when it has none (runs before lint) or it is unreadable."""
    try:
        loaded = json.loads((Path(run_dir) / LINT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
