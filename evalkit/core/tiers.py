"""Service tiers, evalkit's side (issue 45, item 1): the names `--service-tier` takes, the rules on the tier
flags together, and a flex request's longer timeout. What each provider sells and how its wire spells a tier
is its record's (evalkit/providers/tiers.py).

A tier is a delivery setting like `--batch`: the same model gives the same answers at every tier, so it is
in neither the run identity nor the cache key; it is written in manifest.json, and each answer records the
tier its reply says served it (priced at that tier). Stdlib only: the settings import it.
"""

from __future__ import annotations

TIERS: tuple[str, ...] = ("standard", "flex", "priority")  # --service-tier's choices, evalkit's spelling
STANDARD = "standard"
FLEX_TIMEOUT_S = 900.0  # a flex request's timeout when --timeout is not given (OpenAI, Azure: "15 minutes")
DEFAULT_TIMEOUT_S = 120.0  # every other request's


def settings_problem(tier: str | None, fallback: str | None, batch: bool) -> str | None:
    """What is wrong with the tier flags together, whatever the provider (checked with the settings), or None."""
    if tier is not None and tier not in TIERS:
        return f"--service-tier must be one of {', '.join(TIERS)}, not {tier!r}"
    if fallback is not None and fallback != STANDARD:
        return f"--tier-fallback takes only standard, not {fallback!r}"
    if fallback is not None and tier in (None, STANDARD):
        return "--tier-fallback standard needs --service-tier flex or priority"
    if batch and tier not in (None, STANDARD):
        return f"--service-tier {tier} is for live requests: give it or --batch, not both"
    return None


def request_timeout(timeout: float | None, tier: str | None) -> float:
    """Seconds per request: --timeout when given, else 900 for a flex request, else 120."""
    if timeout is not None:
        return timeout
    return FLEX_TIMEOUT_S if tier == "flex" else DEFAULT_TIMEOUT_S


def tier_counts(tiers: list[str | None]) -> dict[str, int]:
    """summary.json's `tiers`: how many answers each tier served (a reply that named none is `unreported`)."""
    out: dict[str, int] = {}
    for tier in tiers:
        name = tier or "unreported"
        out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items()))
