"""What failed in a run, said first: the error count and its top causes (the "error banner").

A run that ends with errors must not read as a score: the console and report.md lead with
this digest, before any metric. Causes are grouped as the circuit breaker groups failures
(addresses and numbers blanked), each shown by its first message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.core.errors import cause_of
from evalkit.core.record import Record
from evalkit.core.types import DATA_ERROR

TOP_CAUSES = 3


def digest(records: Sequence[Record]) -> dict[str, Any] | None:
    """{"errors": n, "answered": n, "causes": [{"cause", "kind", "count"}, ...]} (top causes first),
    or None when nothing failed."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if r.error:
            groups.setdefault(cause_of(r.error, r.error_message), []).append(r)
    if not groups:
        return None
    ranked = sorted(groups.values(), key=len, reverse=True)
    causes = [{"cause": g[0].error_message or g[0].error, "kind": g[0].error, "count": len(g)}
              for g in ranked[:TOP_CAUSES]]
    errors = sum(len(g) for g in ranked)
    return {"errors": errors, "answered": len(records) - errors, "causes": causes,
            "other_causes": max(0, len(ranked) - TOP_CAUSES)}


def data_digest(records: Sequence[Record]) -> dict[str, Any] | None:
    """The data errors (an item's image cannot be read; core.errors.DataError): {"queries": n, "items":
    [ids, in order], "causes": [{"cause", "count"}, ...]}, or None when there are none. Apart from the
    failures: nothing was sent for them, and only a change to the data makes them answerable."""
    data = [r for r in records if r.error == DATA_ERROR]
    if not data:
        return None
    groups: dict[str, list[Record]] = {}
    for r in data:
        groups.setdefault(r.error_message or DATA_ERROR, []).append(r)
    ranked = sorted(groups.values(), key=len, reverse=True)
    return {"queries": len(data), "items": list(dict.fromkeys(r.item_id for r in data)),
            "causes": [{"cause": g[0].error_message or DATA_ERROR, "count": len(g)} for g in ranked[:TOP_CAUSES]],
            "other_causes": max(0, len(ranked) - TOP_CAUSES)}


def data_error_lines(summary: dict[str, Any]) -> list[str]:
    """What the banner says of data errors: how many items, their first causes, and that they are not scored."""
    d = summary.get("data_errors")
    if not d:
        return []
    n = len(d["items"])
    what = f"{n:,} item{'s' if n != 1 else ''} not asked: {'their images' if n != 1 else 'its image'} cannot be read"
    if d.get("skipped"):
        return [f"{what}; skipped (--skip-missing), left out of every metric"]
    lines = [f"{what} (a data error, not the model's: left out of every metric):"]
    lines += [f"  {c['count']:,} × {c['cause']}" for c in d["causes"]]
    if d.get("other_causes"):
        lines.append(f"  and {d['other_causes']} other cause{'s' if d['other_causes'] != 1 else ''}")
    return lines


def banner(summary: dict[str, Any]) -> list[str]:
    """The lines that lead the console and report.md when a run has errors (none otherwise)."""
    d = summary.get("failures")
    stopped = summary.get("stopped_reason")
    data = data_error_lines(summary)
    if not d:
        return data + ([f"stopped sending: {stopped}", "re-run the same command to resume"] if stopped else [])
    n = d["errors"]
    lines = data + ([f"stopped sending: {stopped}"] if stopped else [])
    lines.append(f"{n:,} quer{'ies' if n != 1 else 'y'} failed:")
    lines += [f"  {c['count']:,} × {c['cause']}" for c in d["causes"]]
    if d.get("other_causes"):
        lines.append(f"  and {d['other_causes']} other cause{'s' if d['other_causes'] != 1 else ''}")
    missing = summary.get("missing") or 0
    if missing:
        lines.append(f"{missing:,} more not asked yet")
    if not d["answered"]:
        lines.append("nothing was answered: no metric is reported")
    else:
        lines.append(f"metrics count failed queries as wrong (as the official code scores a missing answer); "
                     f"metrics_answered gives them over the {d['answered']:,} answered queries")
    lines.append("re-run the same command to ask the failed queries again")
    return lines


def nothing_answered(summary: dict[str, Any]) -> bool:
    """Every query of the run failed: no metric, no plot (a blank plot reads as a score of zero)."""
    d = summary.get("failures")
    return bool(d) and not d["answered"]
