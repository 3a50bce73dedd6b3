"""What a comparison of finished runs is, as data: the runs read back and the ranked leaderboard.

Plain values the engine fills (`evalkit.multi.compare`) and the reports read
(`evalkit.multi.compare_report`, `evalkit.report.console`), so a report never imports the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.record import Record
from evalkit.metrics.analysis.result import ModelResult
from evalkit.metrics.analysis.sample_note import sample_of, sample_tag
from evalkit.metrics.analysis.significance import PairTest


@dataclass
class LoadedRun:
    """One finished run as read from its directory (config.json, summary.json, records.jsonl)."""

    path: Path
    label: str
    identity: dict[str, Any]
    config: dict[str, Any]
    summary: dict[str, Any]
    records: list[Record]
    options: dict[str, Any] = field(default_factory=dict)  # what the benchmark's methods read
    paid_usd: float | None = None  # what the command that wrote its summary spent (evalkit/money/shown.py)

    @property
    def complete(self) -> bool:
        """Every query answered (summary.json's `complete`: none missing, none failed)."""
        return bool(self.summary.get("complete", True))

    @property
    def answered(self) -> tuple[int, int]:
        """(queries answered, queries in the run), from summary.json: a query never asked or whose
        request failed is not answered."""
        s, counts = self.summary, self.summary.get("counts") or {}
        n = int(s.get("n_queries") or 0)
        return max(0, n - int(s.get("missing") or 0) - int(counts.get("errors") or 0)
                   - int(counts.get("data_errors") or 0)), n

    def marker(self) -> str:
        """The leaderboard's word on how much of the run there is: "1,624 of 1,624", or
        "228 of 1,624 · incomplete", or for a run that stopped once its answer was known
        "sample 412/2,000 ±2.9" (a sample is never shown as the whole set)."""
        sample = sample_of(self.summary)
        if sample is not None:
            return sample_tag(sample)
        done, n = self.answered
        return f"{done:,} of {n:,}" + ("" if self.complete else " · incomplete")


PAIRED_TEST = ("the paired bootstrap of the difference (McNemar's exact test needs one right-or-wrong answer "
               "per item, and a mean over repeats is a fraction)")


@dataclass(frozen=True)
class CommonRepeats:
    """A comparison over the k >= 2 repeats every run has (`--repeats`): label -> the run's own count."""

    k: int
    per_run: dict[str, int]

    @property
    def method(self) -> str:
        """What the ranking, the intervals and the tests rest on."""
        return (f"ranked on the mean of {self.k} common repeats; intervals and paired tests resample items "
                "with per-item mean correctness over the repeats")

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "used": list(range(self.k)), "per_run": self.per_run,
                "unused": {label: list(range(self.k, n)) for label, n in self.per_run.items() if n > self.k},
                "method": self.method, "paired_test": PAIRED_TEST}


@dataclass(frozen=True)
class CommonItems:
    """A comparison restricted to the items every run has an outcome for (some run is missing queries
    the others have): how many items are ranked, of how many any run has."""

    items: int
    of: int
    queries: int  # the queries of those items (repeat 0)

    @property
    def method(self) -> str:
        return (f"ranked over the {self.items:,} items every run has an outcome for (of {self.of:,}; a failed "
                "query counts as wrong): each model's score, interval and tests are over those items, not its "
                "run's official number")

    def to_dict(self) -> dict[str, Any]:
        return {"items": self.items, "of": self.of, "queries": self.queries, "method": self.method}


@dataclass(frozen=True)
class DecidedPair:
    """One pair of an `--until-decided` comparison, as its runs' "sample" blocks say: decided by the
    sequential test ("test", Holm over the pairs) or by its interval's width ("width") at `at` paired
    items, or not decided (None) after `items`. Difference and interval in points, A - B."""

    a: str
    b: str
    items: int
    decided: str | None
    at: int | None
    difference: float
    interval: tuple[float, float]
    p_value: float
    of: int  # the items of the set

    @property
    def verdict(self) -> str:
        """"decided at 180 items (test)", "decided at 412 items (±W)", "not decided at 1,000 items (the whole
        set)" or "not decided yet (310 items)"."""
        if self.decided == "test":
            return f"decided at {self.at:,} items (sequential test, Holm)"
        if self.decided == "width":
            return f"decided at {self.at:,} items (interval within ±W)"
        whole = " (the whole set)" if self.items >= self.of else ""
        return f"not decided at {self.items:,} items{whole}"

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "items": self.items, "decided": self.decided, "at": self.at,
                "difference": self.difference, "interval": list(self.interval), "p_value": self.p_value,
                "of": self.of, "verdict": self.verdict}


@dataclass
class Leaderboard:
    """A ranked leaderboard of one benchmark, with intervals, paired tests and correlations."""

    benchmark: str
    settings: dict[str, Any]
    results: list[ModelResult]                # ranked, best first
    runs: dict[str, LoadedRun] = field(repr=False)
    pairs: list[PairTest]
    correlation: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    out_dir: Path | None = None
    repeats: CommonRepeats | None = None      # None: repeat 0 only (no run has two repeats in common)
    common: CommonItems | None = None         # None: every run has the same queries (no restriction)
    decided: list[DecidedPair] | None = None  # --until-decided runs: each pair's sequential decision

    @property
    def any_incomplete(self) -> bool:
        """Some run is incomplete: the leaderboards then say how much of each run there is."""
        return any(not self.runs[r.label].complete for r in self.results)

    @property
    def metric(self) -> str | None:
        return next((r.metric for r in self.results if r.metric), None)

    @property
    def ranking(self) -> list[str]:
        return [r.label for r in self.results]

    def pair(self, a: str, b: str) -> PairTest:
        for test in self.pairs:
            if {test.a, test.b} == {a, b}:
                return test
        raise KeyError((a, b))

    def beats(self, label: str) -> list[str]:
        """Models this one is significantly better than."""
        out = []
        for t in self.pairs:
            if t.significant and label in (t.a, t.b):
                winner, loser = (t.a, t.b) if t.diff.estimate > 0 else (t.b, t.a)
                if winner == label:
                    out.append(loser)
        return out

    def to_dict(self) -> dict[str, Any]:
        out = self._base_dict()
        if self.repeats is not None:  # only then: a comparison without repeats says what it always said
            out["repeats"] = self.repeats.to_dict()
        if self.common is not None:
            out["common_items"] = self.common.to_dict()
        if self.decided is not None:
            out["until_decided"] = [d.to_dict() for d in self.decided]
        return out

    def _base_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "metric": self.metric,
            "settings": self.settings,
            "ranking": self.ranking,
            "models": [{**r.to_dict(), "run_dir": str(self.runs[r.label].path),
                        **(_coverage(self.runs[r.label]) if self.any_incomplete else {}),
                        "metrics": self.runs[r.label].summary.get("metrics"),
                        "counts": self.runs[r.label].summary.get("counts"),
                        "usage": self.runs[r.label].summary.get("usage"),
                        "paid_usd": self.runs[r.label].paid_usd} for r in self.results],
            "pairs": [_pair_dict(t) for t in self.pairs],
            "size_correlation": self.correlation,
            "notes": self.notes,
        }


def _coverage(run: LoadedRun) -> dict[str, Any]:
    """A leaderboard row's mark when some run is incomplete (a comparison of complete runs says what it
    always said): whether the run is complete, and how many of its queries were answered (`answered`
    beside it counts the records compared)."""
    done, n = run.answered
    sample = sample_of(run.summary)
    return {"complete": run.complete, "run_answered": done, "n_queries": n,
            **({"sample": sample_tag(sample)} if sample else {})}


def _pair_dict(t: PairTest) -> dict[str, Any]:
    return {"a": t.a, "b": t.b, "n_common": t.n_common, "diff": t.diff.estimate, "diff_ci95": [t.diff.lo, t.diff.hi],
            "p_bootstrap": t.p_bootstrap,
            "mcnemar": ({"only_a": t.mcnemar.only_a, "only_b": t.mcnemar.only_b, "p": t.mcnemar.p}
                        if t.mcnemar else None),
            "p_holm": t.p_holm, "significant": t.significant}
