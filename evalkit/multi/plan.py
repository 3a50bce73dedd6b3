"""`evalkit plan`: what a run to ±W points, or a comparison to a difference of D points, would ask and
cost, worked out before anything is sent.

Why: `--until-ci` and `--until-decided` are the largest cost lever there is, but only if a user can see
beforehand how many items they will take. For each model and service tier the plan gives the items of
the fixed design (planning.py: Wald with the finite-population correction, McNemar), the median items
of the sequential rule a run would follow (stopping_sim.py: seeded simulation of that very rule), and
for each the requests, tokens and dollars, paid now and at list price, next to the whole set's.

The money is the dry run's (engine/dry_run.py through `evalkit.run(..., dry_run=True)`: the same
prices, tiers, cache look-ups and token estimates, offline, writing nothing), scaled from the whole set
to the planned items: an ordered sample is a random share of the set, so it costs that share of the
set on average. "Paid now" leaves out what the cache and the run directory already hold (in the same
share); "list" prices every request.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.benchmarks import REGISTRY
from evalkit.core.errors import EvalkitError
from evalkit.metrics.analysis import planning

ALPHA = 0.05
DEFAULT_DISCORDANCE = 0.30  # the design PairState bets on by default (docs/stopping.md)
ASSUMED_ACCURACY = 0.6  # no registry of evalkit records a published accuracy (benchmarks, data, providers)
SIM_RUNS = 300  # seeded runs per simulated median: about a second for a 23.6k-item set
SIM_SEED = 46
_MONEY = ("cost_low_usd", "cost_high_usd")


@dataclass(frozen=True)
class PlanAsk:
    """What the user asked: the benchmark, the models, one design (--width or --effect, in points) and
    the run options the dry run is given (data, images, prices, the benchmark's options, ...)."""

    bench: str
    models: tuple[str, ...]
    width: float | None = None
    effect: float | None = None
    power: float = 0.8
    discordance: float | None = None
    runs: tuple[str, str] | None = None
    accuracy: float | None = None
    tiers: tuple[str | None, ...] = (None,)
    options: Mapping[str, Any] = field(default_factory=dict)
    sim_runs: int = SIM_RUNS
    seed: int = SIM_SEED


def check(ask: PlanAsk) -> None:
    """Bad input: one line naming the flag (EvalkitError: exit 2), before anything is read."""
    if ask.bench not in REGISTRY:
        raise EvalkitError(f"plan: unknown benchmark '{ask.bench}' (known: {', '.join(REGISTRY)})")
    if not ask.models:
        raise EvalkitError("plan: the following arguments are required: --model")
    if (ask.width is None) == (ask.effect is None):
        raise EvalkitError("plan: give one of --width W (points of the interval) or --effect D (points of difference)")
    if ask.width is not None and not 0 < ask.width <= 100:
        raise EvalkitError(f"plan: --width must be more than 0 and at most 100 points, not {ask.width:g}")
    if ask.effect is not None and not 0 < ask.effect <= 100:
        raise EvalkitError(f"plan: --effect must be more than 0 and at most 100 points, not {ask.effect:g}")
    if not 0 < ask.power < 1:
        raise EvalkitError(f"plan: --power must be between 0 and 1 (exclusive), not {ask.power:g}")
    if ask.accuracy is not None and not 0 < ask.accuracy < 1:
        raise EvalkitError(f"plan: --accuracy must be between 0 and 1 (exclusive), not {ask.accuracy:g}")
    if ask.discordance is not None and ask.runs is not None:
        raise EvalkitError("plan: give --discordance or --runs, not both")
    if ask.discordance is not None and not 0 < ask.discordance <= 1:
        raise EvalkitError(f"plan: --discordance must be more than 0 and at most 1, not {ask.discordance:g}")
    if ask.width is not None and (ask.discordance is not None or ask.runs is not None):
        raise EvalkitError("plan: --discordance and --runs plan a comparison: use them with --effect")
    if ask.effect is not None and len(ask.models) < 2:
        raise EvalkitError("plan: --effect plans a comparison: give two or more --model")
    if ask.sim_runs < 10:
        raise EvalkitError(f"plan: --sim-runs must be at least 10, not {ask.sim_runs}")


def discordance_of_runs(a: str | Path, b: str | Path) -> tuple[float, int]:
    """ψ from two earlier runs: the share of the items both answered where exactly one was right (an item
    is right when every one of its answers is: all its variants and repeats), and how many items that is."""
    right_a, right_b = _item_rights(Path(a)), _item_rights(Path(b))
    shared = right_a.keys() & right_b.keys()
    if not shared:
        raise EvalkitError(f"plan: --runs: {a} and {b} share no answered items")
    return sum(right_a[i] != right_b[i] for i in shared) / len(shared), len(shared)


def _item_rights(run_dir: Path) -> dict[str, bool]:
    from evalkit.rundir.records import read_records

    path = run_dir / "records.jsonl"
    if not path.is_file():
        raise EvalkitError(f"plan: --runs: {run_dir} is not a run directory (no records.jsonl)")
    answers: dict[str, list[bool | None]] = {}
    for r in read_records(path).records.values():
        answers.setdefault(r.item_id, []).append(None if r.error is not None else r.correct)
    return {item: all(bool(x) for x in xs) for item, xs in answers.items() if all(x is not None for x in xs)}


def plan(ask: PlanAsk, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The plan as plain data (what `--json` prints): the set, the design and, per model and tier, the
    rows (fixed design, sequential median, whole set) with requests, tokens and money."""
    import os

    check(ask)
    # a plan asks nobody, not even the Hub for a listing: data not here is planned from the bundled sample
    env = {**(os.environ if env is None else env), "HF_HUB_OFFLINE": "1"}
    the_set = _the_set(ask, env)
    dry = {(m, t): _dry_run(ask, m, t, env, the_set) for m in ask.models for t in ask.tiers}
    n_items, strata = the_set.items, the_set.strata
    design = _width_design(ask, n_items) if ask.width is not None else _effect_design(ask, n_items)
    rows = []
    for (_, tier), d in dry.items():
        paid, listed = d["paid"], d["list"]
        plans = {name: _scaled(items, n_items, paid, listed) for name, items in design["items"].items()
                 if items is not None}
        plans["whole"] = _scaled(n_items, n_items, paid, listed)
        rows.append({"model": d["label"], "service_tier": tier or "standard",
                     "per_request": _per_request(listed), "plans": plans,
                     "notes": list(dict.fromkeys([*paid.get("notes", []), *listed.get("notes", [])]))})
    n_queries = round(next(iter(dry.values()))["list"]["n_queries"])
    repeats = int(ask.options.get("repeats") or 1)
    return {"benchmark": ask.bench, "data": the_set.data, "items": n_items, "queries": n_queries,
            "variants_per_item": n_queries / n_items / repeats, "repeats": repeats, "strata": strata,
            "notes": list(the_set.notes), "design": design, "models": rows, "sent": 0}


@dataclass(frozen=True)
class TheSet:
    """The items a plan is for: how many, per category, the data the dry
    run prices (the set itself, or the bundled sample scaled by `scale` to a set not downloaded)."""

    items: int
    strata: dict[str, int]
    data: str
    options: dict[str, Any]
    scale: float = 1.0
    notes: tuple[str, ...] = ()


def _the_set(ask: PlanAsk, env: Mapping[str, str]) -> TheSet:
    from evalkit.benchmarks.prepare import prepare
    from evalkit.benchmarks.readers.saved_index import LOCAL_FOLDER as INDEX_FOLDER
    from evalkit.benchmarks.run_settings import resolve_settings
    from evalkit.data.registry import sources_for

    s = resolve_settings(ask.bench, ask.models[0], {**ask.options, "env": env})
    index_dir = None if s.config.no_cache else Path(s.config.cache_path(env)) / INDEX_FOLDER
    opts = s.bench_dict()
    try:
        prepared = prepare(ask.bench, opts, env=env, index_write=False, index_dir=index_dir)
    except EvalkitError:
        published = [q for e in sources_for(ask.bench, env) if (q := e.questions_for(opts)) is not None]
        if opts.get("data") is not None or not published:
            raise
        n = sum(published)
        sample = prepare(ask.bench, {**opts, "data": "sample"}, env=env, index_write=False)
        note = (f"the data is not here (a plan downloads nothing): {n:,} questions as published, priced from the "
                f"bundled sample's {len(sample.items)} items scaled to them (its images are small: real image tokens "
                f"may be higher), one category assumed; `evalkit data pull {ask.bench}` makes the plan exact")
        return TheSet(n, {"": n}, f"{ask.bench}'s official source (published size)",
                      {**ask.options, "data": "sample"}, n / len(sample.items), (note,))
    items = prepared.items
    strata = dict(sorted(Counter(item.category for item in items).items()))
    return TheSet(len(items), strata, f"{prepared.data} ({len(items):,} items)", dict(ask.options))


def _dry_run(ask: PlanAsk, model: str, tier: str | None, env: Mapping[str, str], the_set: TheSet) -> dict[str, Any]:
    """The dry run of this model at this tier (what `evalkit run ... --dry-run` says), and at list price:
    the same without the cache or the run directory's answers when some were held."""
    from evalkit.engine.evaluate import run

    opts = {**the_set.options, **({"service_tier": tier} if tier else {})}
    result = run(ask.bench, model, dry_run=True, quiet=True, progress=False, env=env, **opts)
    paid = result.summary["dry_run"]
    listed = paid
    if paid.get("to_send", 0) < paid["n_queries"]:
        with tempfile.TemporaryDirectory(prefix="evalkit-plan-") as tmp:  # never created: a dry run writes nothing
            listed = run(ask.bench, model, dry_run=True, quiet=True, progress=False, env=env, no_cache=True,
                         out=str(Path(tmp) / "none"), **opts).summary["dry_run"]
    return {"label": result.summary.get("model", model), "paid": _times(paid, the_set.scale),
            "list": _times(listed, the_set.scale)}


_COUNTS = ("n_queries", "to_send", "input_tokens", "output_tokens_low", "output_tokens_high", *_MONEY)


def _times(dry: Mapping[str, Any], f: float) -> dict[str, Any]:
    """A dry run's counts and money times f (the sample's to the published set's); f = 1: as it is."""
    if f == 1.0:
        return dict(dry)
    return {**dry, **{k: dry[k] * f for k in _COUNTS if dry.get(k) is not None}}


def _width_design(ask: PlanAsk, n_items: int) -> dict[str, Any]:
    from evalkit.metrics.analysis.stopping_sim import FIRST_LOOK, until_ci

    assert ask.width is not None
    p = ask.accuracy if ask.accuracy is not None else ASSUMED_ACCURACY
    w = ask.width / 100.0
    # one interval for the whole set: a sampled run's every prefix is a simple random sample (engine/until/order.py)
    sim = until_ci(p, w, sizes=n_items, runs=ask.sim_runs, seed=ask.seed)
    return {"kind": "width", "width_points": ask.width, "level": 1 - ALPHA, "accuracy": p,
            "accuracy_source": "given" if ask.accuracy is not None else "assumed",
            "fixed": {"rule": "Wald, finite-population correction", "items": planning.wald_items(p, w, population=n_items)},
            "sequential": {"rule": f"--until-ci {ask.width:g}", "median_items": min(sim.median(), n_items),
                           "runs": ask.sim_runs, "seed": ask.seed, "first_look": FIRST_LOOK},
            "items": {"fixed": planning.wald_items(p, w, population=n_items),
                      "sequential": min(sim.median(), n_items)}}


def _effect_design(ask: PlanAsk, n_items: int) -> dict[str, Any]:
    from evalkit.metrics.analysis.stopping_sim import until_decided

    assert ask.effect is not None
    if ask.runs is not None:
        psi, shared = discordance_of_runs(*ask.runs)
        source = f"{ask.runs[0]} and {ask.runs[1]} ({shared:,} items both answered)"
    else:
        psi, shared = (ask.discordance, None) if ask.discordance is not None else (DEFAULT_DISCORDANCE, None)
        source = "given" if ask.discordance is not None else "default"
    d = ask.effect / 100.0
    if d > psi + 1e-12:
        raise EvalkitError(f"plan: --effect {ask.effect:g} points is more than the discordance {psi:.3f} allows: "
                           "two models differ only on the items where exactly one is right")
    k = len(ask.models)
    pairs = k * (k - 1) // 2
    alpha = ALPHA / pairs
    fixed = math.ceil(planning.mcnemar_items_raw(d, psi, alpha=alpha, power=ask.power) - 1e-9)
    sim = until_decided(d, psi, runs=ask.sim_runs, seed=ask.seed, cap=n_items, alpha=ALPHA, pairs=pairs)
    median = sim.quantile(0.5)
    at_power = sim.quantile(ask.power)
    return {"kind": "effect", "effect_points": ask.effect, "discordance": psi, "discordance_source": source,
            "power": ask.power, "alpha": ALPHA, "pairs": pairs,
            "holm": (f"Holm over {pairs} pairs: each planned at its strictest step, α/{pairs} = {alpha:.4f}"
                     if pairs > 1 else None),
            "fixed": {"rule": "McNemar (Connor 1987)", "items": fixed, "more_than_the_set": fixed > n_items},
            "sequential": {"rule": "--until-decided (anytime paired test)", "median_items": median,
                           "power_items": at_power, "decided_by_the_whole_set": sim.decided_share(),
                           "runs": ask.sim_runs, "seed": ask.seed},
            "items": {"fixed": min(fixed, n_items), "sequential": median}}


def _scaled(items: int, n_items: int, paid: Mapping[str, Any], listed: Mapping[str, Any]) -> dict[str, Any]:
    """A plan of `items` items: the whole set's requests, tokens and money times items / N."""
    f = items / n_items

    def times(v: Any) -> Any:
        return None if v is None else v * f

    return {"items": items, "requests": round(listed["n_queries"] * f),
            "input_tokens": round(listed["input_tokens"] * f),
            "output_tokens_low": round(listed["output_tokens_low"] * f),
            "output_tokens_high": round(listed["output_tokens_high"] * f),
            "paid_low_usd": times(paid.get("cost_low_usd")), "paid_high_usd": times(paid.get("cost_high_usd")),
            "list_low_usd": times(listed.get("cost_low_usd")), "list_high_usd": times(listed.get("cost_high_usd"))}


def _per_request(listed: Mapping[str, Any]) -> dict[str, float | None]:
    """The dry run's estimate of one request at list price (low: a short answer; high: all of max_tokens)."""
    n = max(1, int(listed["to_send"]))
    return {k.replace("cost_", ""): (None if listed.get(k) is None else listed[k] / n) for k in _MONEY}
