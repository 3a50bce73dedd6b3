"""What lint reports: the finding kinds, their severities, ordering and the one-line summary.

A finding is `evalkit.core.findings.Finding` (severity, kind, one-line message, file, item ids,
where): the same type a run's report carries, so lint's findings can sit next to the scores.
Severity says what a fault does to a score: error, no answer can be right or the data cannot be
read as a run would read it; warning, the score is skewed (a question weighs twice, an option is
missing); info, a fact worth knowing (balance, size outliers, near-duplicate pictures).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evalkit.core.findings import SEVERITIES, Finding

# kind -> (severity, or "error|warning" where the finding decides, what it means); docs/lint.md lists them
KINDS: dict[str, tuple[str, str]] = {
    "unreadable-file": ("error", "a data file the benchmark's loader cannot read at all"),
    "unreadable-row": ("error", "a row, record or block the benchmark's loader rejects (a run stops there)"),
    "duplicate-id": ("error", "two rows with the same id (a run refuses the file)"),
    "rotation-mismatch": ("error|warning", "TDBench rotation files that disagree in indices or categories "
                                           "(error), or in one problem's option count (warning)"),
    "empty-question": ("error", "a question with no text"),
    "no-options": ("error", "a multiple-choice item with no options"),
    "empty-option": ("warning", "an option with no text (a gap in the option columns)"),
    "duplicate-option": ("error|warning", "two options with the same text: error when one is the gold answer"),
    "gold-not-in-options": ("error", "a gold answer that is not among the item's options"),
    "option-read-as-missing": ("error|warning", "TDBench official mode: an option cell holding 'None' (or 'nan', "
                                                "'NaN'), which VLMEvalKit's pandas reads as missing, left out of "
                                                "the prompt as there (error when it is the gold answer)"),
    "gold-not-yes-no": ("error", "a yes/no item whose gold is neither"),
    "option-count": ("warning", "an option count the item type's protocol does not have (info for generic mcq)"),
    "duplicate-question": ("error|warning", "the same question on the same image(s) asked more than once: "
                                            "error when the gold answers differ"),
    "image-missing": ("error", "an image file that is not there"),
    "image-empty": ("error", "a zero-byte image"),
    "image-too-big": ("error", "an image over the --max-image-mb cap (a run does not ask its items)"),
    "image-unreadable": ("error", "an image that does not decode"),
    "image-truncated": ("error", "an image whose data ends early"),
    "image-size-outlier": ("info", "images outside the set's 1st-99th percentile of file size"),
    "image-shared": ("info", "the same image under different ids where the format does not expect it"),
    "image-near-duplicate": ("info", "different image files that look the same (16x16 fingerprint)"),
    "answer-balance": ("info", "gold answer positions per category against uniform (chi-square)"),
    "yes-no-balance": ("info", "share of Yes among yes/no golds, overall and per category (chi-square)"),
    "circular-collision": ("error|warning", "IF-Bench: two options with the same text, so the circular "
                                            "shifts collide"),
    "question-type": ("warning", "MME-RealWorld: a question type, task or domain evalkit does not know"),
    "rotation-not-applied": ("warning", "TDBench: one index shows the same picture at two rotations"),
}

# What `evalkit run` checks at its start (no image decoding): everything but the decoding image
# checks, the near-duplicate fingerprints and the balance statistics.
CHEAP_ONLY_SKIPS = ("image-unreadable", "image-truncated", "image-shared", "image-near-duplicate",
                    "answer-balance", "yes-no-balance")


def finding(severity: str, kind: str, message: str, *, file: str | None = None, items: Iterable[str] = (),
            where: str | None = None) -> Finding:
    """A Finding of a known kind (a typo in a kind fails here, not in a report)."""
    if kind not in KINDS:
        raise ValueError(f"unknown lint finding kind {kind!r}")
    return Finding(severity, kind, " ".join(message.split()), file, tuple(items), where)


def sort_key(f: Finding) -> tuple[int, str, str, str]:
    """Most severe first, then by kind, file and place (the checks' own order after that)."""
    return SEVERITIES.index(f.severity), f.kind, f.file or "", f.where or ""


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """Sorted by `sort_key`, exact repeats dropped."""
    return sorted(dict.fromkeys(findings), key=sort_key)


def severity_counts(findings: Iterable[Finding]) -> dict[str, int]:
    out = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        out[f.severity] += 1
    return out


def count_text(c: dict[str, int]) -> str:
    """ "1 error, 2 warnings, 3 info" (severities with none left out), or "no findings"."""
    parts = [f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in c.items() if n]
    return ", ".join(parts) or "no findings"


@dataclass(frozen=True)
class LintReport:
    """The findings of one lint of one data set, with what was looked at."""

    benchmark: str
    data: str
    findings: tuple[Finding, ...]
    checks: str  # "full" (everything) or "cheap" (text, options, gold, file existence and size)
    n_items: int
    n_images: int

    @property
    def counts(self) -> dict[str, int]:
        return severity_counts(self.findings)

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def to_dict(self) -> dict[str, object]:
        return {"benchmark": self.benchmark, "data": self.data, "checks": self.checks, "items": self.n_items,
                "images": self.n_images, "counts": self.counts, "findings": [f.to_dict() for f in self.findings]}

    @staticmethod
    def from_dict(d: dict[str, object]) -> LintReport:
        raw = d.get("findings") or []
        assert isinstance(raw, Sequence)
        return LintReport(str(d["benchmark"]), str(d["data"]), tuple(Finding.from_dict(f) for f in raw),
                          str(d.get("checks") or "full"), int(d.get("items") or 0),  # type: ignore[call-overload]
                          int(d.get("images") or 0))  # type: ignore[call-overload]
