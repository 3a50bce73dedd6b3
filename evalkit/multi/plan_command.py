"""`evalkit plan BENCH --model M [--model M2 ...] (--width W | --effect D) ...`: its flags and what it prints.

Light at import (the CLI builds every command's parser on start); the planning (plan.py: the dry run,
the simulation, numpy) is imported when the command runs. The named benchmark's own flags are added by
cli/parser.py, as for `run`, so a plan prices the same variants a run would ask.
"""

from __future__ import annotations

import argparse
from typing import Any

from evalkit.core import settings
from evalkit.core.settings import RunConfig
from evalkit.core.tiers import TIERS

# the run flags that change what a run would send or what it costs (the dry run is given them)
RUN_FLAGS = ("data", "lock", "images", "out", "base_url", "cache_tag", "cache_dir", "no_cache", "prices", "repeats",
             "max_tokens", "reasoning_effort", "thinking_budget", "detail", "media_resolution", "max_side",
             "max_pixels", "api_version", "api")


def add_plan_parser(sub: Any) -> None:
    """Register `evalkit plan` (the CLI calls this)."""
    p = sub.add_parser("plan", help="before anything is sent: the items, requests, tokens and dollars to reach "
                                    "±W points (--width) or to tell models D points apart (--effect)")
    p.add_argument("bench", metavar="BENCH", help="the benchmark")
    p.add_argument("--model", action="append", help="PROVIDER/MODEL; repeat it for each model")
    p.add_argument("--width", type=float, metavar="W", help="plan a run to a 95 %% interval of ±W points "
                   "(`--until-ci W`)")
    p.add_argument("--effect", type=float, metavar="D", help="plan a comparison that detects a difference of D "
                   "points between models (`--until-decided`)")
    p.add_argument("--power", type=float, default=0.8, metavar="P", help="with --effect: the power (default 0.8)")
    p.add_argument("--discordance", type=float, metavar="ψ", help="with --effect: the share of items where exactly "
                   "one model is right (default 0.30)")
    p.add_argument("--runs", nargs=2, metavar=("RUN_A", "RUN_B"), help="with --effect: read the discordance from "
                   "two earlier run directories on the same items")
    p.add_argument("--accuracy", type=float, metavar="p", help="with --width: the accuracy expected (default 0.6, "
                   "assumed: evalkit records no published accuracy)")
    p.add_argument("--service-tier", dest="tiers", action="append", choices=TIERS, metavar="T",
                   help=f"price at this service tier ({', '.join(TIERS)}); repeat it for several (default: standard)")
    p.add_argument("--sim-runs", type=int, default=300, metavar="N", help="seeded runs of the simulated stopping "
                   "rule (default 300)")
    p.add_argument("--sim-seed", type=int, default=46, metavar="S", help="seed of the simulation (default 46)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    settings.add_arguments(p.add_argument_group("run options (as for `evalkit run`: what is sent and priced)"),
                           RunConfig, skip=[n for n in settings.field_names(RunConfig) if n not in RUN_FLAGS])


def cmd_plan(args: argparse.Namespace, console: Any) -> int:
    import json

    from evalkit.benchmarks import REGISTRY, benchmark_class
    from evalkit.multi.plan import PlanAsk, check, plan

    options = {k: v for k, v in settings.given(args, RunConfig).items() if k != "model"}
    if args.bench in REGISTRY:
        options.update(settings.given(args, benchmark_class(args.bench).Options))
    ask = PlanAsk(args.bench, tuple(args.model or ()), width=args.width, effect=args.effect, power=args.power,
                  discordance=args.discordance, runs=tuple(args.runs) if args.runs else None,
                  accuracy=args.accuracy, tiers=tuple(dict.fromkeys(args.tiers or [None])), options=options,
                  sim_runs=args.sim_runs, seed=args.sim_seed)
    check(ask)
    result = plan(ask)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_plan(result, console)
    return 0


def _usd(low: float | None, high: float | None) -> str:
    from evalkit.money.shown import usd

    return "—" if low is None else f"{usd(low)} – {usd(high)}"


def headline(p: dict[str, Any]) -> list[str]:
    """The lines above the table: the set, the design, and how each figure was reached."""
    d = p["design"]
    strata = p["strata"]
    cats = f", {len(strata)} categories" if len(strata) > 1 else ""
    repeats = f" × {p['repeats']} repeats" if p["repeats"] > 1 else ""
    per = p["variants_per_item"]
    lines = [f"plan · {p['benchmark']} · {p['items']:,} items{cats} · {per:g} request{'' if per == 1 else 's'} per "
             f"item{repeats} · {p['data']}"]
    seq, fixed = d["sequential"], d["fixed"]
    if d["kind"] == "width":
        acc = "assumed" if d["accuracy_source"] == "assumed" else "given"
        lines.append(f"±{d['width_points']:g} points at 95 % · accuracy {d['accuracy']:.2f} ({acc})")
        lines.append(f"  fixed design ({fixed['rule']}): {fixed['items']:,} items")
        lines.append(f"  {seq['rule']} (confidence sequence over a random order, bets tuned to ±{d['width_points']:g}, "
                     f"first look at {seq['first_look']} items, a look after every item): median "
                     f"{seq['median_items']:,} items in {seq['runs']} simulated runs (seed {seq['seed']})")
    else:
        src = d["discordance_source"]
        lines.append(f"a difference of {d['effect_points']:g} points · power {d['power']:g} · α {d['alpha']:g} · "
                     f"discordance ψ {d['discordance']:.3f} ({'from ' + src if src not in ('default', 'given') else src})")
        if d["holm"]:
            lines.append(f"  {d['holm']}")
        over = " (more than the set holds)" if fixed["more_than_the_set"] else ""
        lines.append(f"  fixed design ({fixed['rule']}): {fixed['items']:,} paired items{over}")
        median = f"{seq['median_items']:,}" if seq["median_items"] is not None else f"more than {p['items']:,}"
        at_power = f"{seq['power_items']:,}" if seq["power_items"] is not None else f"more than {p['items']:,}"
        lines.append(f"  {seq['rule']}: median {median} items; {d['power']:.0%} of runs decided by {at_power}; "
                     f"{seq['decided_by_the_whole_set']:.1%} by the whole set ({seq['runs']} simulated runs, "
                     f"seed {seq['seed']})")
    return lines


def print_plan(p: dict[str, Any], console: Any) -> None:
    """The headline, then one table per model and tier: the fixed design, the sequential median, the whole set."""
    from rich.table import Table

    for line in [*headline(p), *p.get("notes", [])]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    names = {"fixed": "fixed design", "sequential": "sequential, median", "whole": "whole set"}
    for row in p["models"]:
        table = Table(title=f"{row['model']} · {row['service_tier']}", header_style="bold")
        for name in ("plan", "items", "requests", "input tokens", "output tokens", "paid now", "list price"):
            table.add_column(name, justify="left" if name == "plan" else "right")
        for key, r in row["plans"].items():
            table.add_row(names[key], f"{r['items']:,}", f"{r['requests']:,}", f"{r['input_tokens']:,}",
                          f"{r['output_tokens_low']:,} – {r['output_tokens_high']:,}",
                          _usd(r["paid_low_usd"], r["paid_high_usd"]), _usd(r["list_low_usd"], r["list_high_usd"]))
        console.print(table)
        for note in row["notes"]:
            console.print(f"{row['model']}: {note}", markup=False, highlight=False, soft_wrap=True)
    console.print("paid now: the requests not yet answered in the cache or the run directory; list price: every "
                  "request. From the dry run's estimate (low: short answers; high: every answer at max_tokens). "
                  "Nothing was sent or written.", markup=False, highlight=False, soft_wrap=True)
