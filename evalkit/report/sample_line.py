"""The line a sampled run leads with (report.md's first line, and the console's): what it is a sample of.

Read from summary.json's "sample" block (engine/until/), so `evalkit report` and the viewer say the
same without the engine. The half-width is in points (percentage points, whatever the headline's
scale), as `--until-ci W` and `--width W` are given.
"""

from __future__ import annotations

from typing import Any


def sample_line(summary: dict[str, Any]) -> str | None:
    """"stopped at N of M items: ±h points (95 %; asked ±W)", or None when the run is not a sample."""
    block = summary.get("sample")
    if not isinstance(block, dict):
        return None
    try:
        items, of = int(block["items"]), int(block["of"])
        level = float(block.get("level") or 0.95) * 100
        head = f"stopped at {items:,} of {of:,} items" if summary.get("stopped") == "sample" \
            else f"a sample: {items:,} of {of:,} items"
        if block.get("rule") == "until-decided":
            return f"{head}: every pair decided" if summary.get("stopped") == "sample" else head
        scale = 100.0 / _scale(block)
        half = float(block["half_width"]) * scale
    except (KeyError, TypeError, ValueError):
        return None
    target = block.get("target")
    asked = f"; asked ±{float(target):g}" if isinstance(target, (int, float)) and not isinstance(target, bool) else ""
    return f"{head}: ±{half:.1f} points ({level:g} %{asked})"


def _scale(block: dict[str, Any]) -> float:
    """The headline's scale (100 for percentages, 1 for fractions) the block says; 100 when it does not."""
    scale = block.get("scale")
    if isinstance(scale, (int, float)) and scale > 0:
        return float(scale)
    return 100.0
