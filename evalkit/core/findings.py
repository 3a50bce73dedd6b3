"""A finding about the data a score rests on: the one type every data check reports.

RGB-Th-Bench's release asks some questions twice on one scene (once with opposite gold answers);
such facts change what a score means, so they travel with the score (summary.json "findings",
report.md beside the metrics, a one-line count on the console) instead of living in a log. The lint
command fills the same type with more kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    severity: str  # error: no answer can be right (or the data is broken); warning: skews a score; info
    kind: str  # e.g. "duplicate-question"
    message: str  # one line, for people
    file: str | None = None
    items: tuple[str, ...] = ()
    where: str | None = None  # scene, block, row: where the format has such a thing

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, not {self.severity!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "kind": self.kind, "message": self.message, "file": self.file,
                "items": list(self.items), "where": self.where}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Finding:
        return Finding(d["severity"], d["kind"], d["message"], d.get("file"), tuple(d.get("items") or ()),
                       d.get("where"))


def count_line(findings: list[dict[str, Any]]) -> str | None:
    """ "3 data findings (1 error, 2 warnings): see report.md", or None when there are none."""
    if not findings:
        return None
    counts = {s: sum(1 for f in findings if f.get("severity") == s) for s in SEVERITIES}
    parts = [f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    return f"{len(findings)} data finding{'s' if len(findings) != 1 else ''} ({', '.join(parts)}): see report.md"
