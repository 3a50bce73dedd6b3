"""How a sampled run is shown wherever its numbers appear: a sample is never shown as the whole set.

A run that stopped once its answer was known (`--until-ci`, `--until-decided`) holds summary.json's
"sample" block (docs/stopping.md). Its paper tables are estimates from the items it asked: a table
whose numbers are means over items is kept and marked ("estimate from N of M items, ±h points"),
one that needs every item (`ReportTable.whole_set`: counts of the whole file, a fixed-n test, a
solution per category) is left out with a line saying why. Leaderboards (compare, the matrix, the
view) mark the run's row ("sample N/M ±h"). Pure functions of the summary, so `evalkit report`,
`evalkit view` and `evalkit compare` say the same as the run did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def sample_of(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's "sample" block, None for a run of the whole set (or one written before samples)."""
    block = summary.get("sample")
    return block if isinstance(block, dict) and block.get("of") else None


def _points(sample: Mapping[str, Any]) -> float | None:
    """The interval's half-width in percentage points, whatever the headline's scale (the block's
    `scale`: 100 for a percentage, 1 for a fraction), as `--until-ci W` is given."""
    h, scale = sample.get("half_width"), sample.get("scale")
    if not isinstance(h, int | float) or isinstance(h, bool):
        return None
    return float(h) * 100.0 / (float(scale) if isinstance(scale, int | float) and scale > 0 else 100.0)


def sample_tag(sample: Mapping[str, Any]) -> str:
    """A leaderboard row's mark: "sample 412/2,000 ±2.9" (no ± when the rule gave no interval)."""
    h = _points(sample)
    return f"sample {int(sample.get('items') or 0):,}/{int(sample['of']):,}" + ("" if h is None else f" ±{h:.1f}")


def estimate_note(sample: Mapping[str, Any]) -> str:
    """A kept table's mark: "estimate from 412 of 2,000 items, ±2.9 points (the headline's 95 % interval)"."""
    h = _points(sample)
    return (f"estimate from {int(sample.get('items') or 0):,} of {int(sample['of']):,} items"
            + ("" if h is None else f", ±{h:.1f} points (the headline's 95 % interval)"))


def left_out_line(table: Mapping[str, Any], sample: Mapping[str, Any]) -> str:
    """What stands in place of a table that needs every item."""
    return (f"{table.get('title')}: left out, this run is a sample of {int(sample.get('items') or 0):,} of "
            f"{int(sample['of']):,} items and {table['whole_set']}")


def shown_tables(summary: Mapping[str, Any], *, marked: bool = True) -> list[dict[str, Any]]:
    """summary["tables"] as a report shows them: unchanged for a whole run; for a sample each kept
    table's note starts with its mark (unless `marked` is False: the console says it once, above
    them), and a table that needs every item becomes {"title", "left_out": line} (readers print the
    line instead of the table)."""
    tables = [t for t in summary.get("tables") or [] if isinstance(t, dict)]
    sample = sample_of(summary)
    if sample is None:
        return tables
    out: list[dict[str, Any]] = []
    for t in tables:
        if t.get("whole_set"):
            out.append({"title": t.get("title"), "console": t.get("console"), "left_out": left_out_line(t, sample)})
            continue
        mark = estimate_note(sample)
        out.append({**t, "note": f"{mark}; {t['note']}" if t.get("note") else mark} if marked else t)
    return out
