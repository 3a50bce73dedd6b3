"""`evalkit compare RUN_DIR...`: one benchmark, many models, a leaderboard with honest error bars.

Runs are read from their directories (config.json, records.jsonl, summary.json); nobody is
asked anything. Runs of different benchmarks, or of one benchmark under different protocol
settings, are refused with the differing settings named: their numbers do not compare.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.benchmarks import get_benchmark
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.engine.repeats import compare_note, n_repeats, over_repeats
from evalkit.metrics.analysis.comparison import (
    CommonItems,
    CommonRepeats,
    DecidedPair,
    Leaderboard,
    LoadedRun,
)
from evalkit.metrics.analysis.correlation import load_sizes, size_correlation
from evalkit.metrics.analysis.result import N_BOOT, analyze
from evalkit.metrics.analysis.significance import all_pairs, bootstrap_ci, resample, same_observations
from evalkit.money.shown import run_costs
from evalkit.multi.compare_report import write_comparison
from evalkit.report.sample_line import sample_line
from evalkit.rundir.costs import with_list_cost
from evalkit.rundir.identity import protocol_view, saved_settings
from evalkit.rundir.layout import read_finished
from evalkit.rundir.records import damaged_note

if TYPE_CHECKING:
    from evalkit.report.figures import Plotter

# Settings that may differ between the models of one comparison: who answered, and how it
# was asked to generate. Everything else in a run's identity is protocol and must agree.
PER_MODEL = {"model", "endpoint", "cache_tag", "max_tokens", "temperature", "seed", "top_p", "extra",
             "max_side", "max_pixels", "reasoning_effort", "thinking_budget", "detail", "media_resolution", "api"}


def load_run(path: Path, notes: list[str] | None = None) -> LoadedRun:
    """One run as its summary scored it: records kept but not scored there (queries no longer in its
    data, answers to changed questions) are left out. Damaged records lines are skipped, and said
    so in `notes`."""
    rundir, saved, summary = read_finished(Path(path))
    unscored = set(summary.get("unscored_ids") or ())
    records = [r for qid, r in rundir.load_records().items() if qid not in unscored]
    summary = with_list_cost(summary, saved.get("config"), records)  # a 0.3 summary's, from its records
    if rundir.damaged and notes is not None:
        notes.append(f"{rundir.path.name}: " + damaged_note(rundir.damaged, saved=False,
                                                            then=f"`evalkit report {path}` keeps them aside"))
    # identities of 0.1.0 and of today, in one form: defaults dropped, the data's fingerprint (or path)
    return LoadedRun(rundir.path, str(summary.get("model") or saved["identity"].get("model")),
                     protocol_view(saved["identity"]), saved.get("config", {}), summary, records,
                     saved_settings(saved).bench_dict(), run_costs(summary).paid)


class _Labelled(Protocol):
    label: str
    path: Path


def label_all(runs: Sequence[_Labelled]) -> None:
    """Model labels, made unique with the run directory's name where two runs share a model."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    for run in runs:
        if seen[run.label] > 1:
            run.label = f"{run.label} ({run.path.name})"


def check_compatible(runs: Sequence[LoadedRun]) -> list[str]:
    """Refuse runs that do not measure the same thing; return notes on what may differ."""
    first = runs[0]
    benches = {r.identity.get("benchmark") for r in runs}
    if len(benches) > 1:
        named = ", ".join(f"{r.path.name}: {r.identity.get('benchmark')}" for r in runs)
        raise EvalkitError(f"cannot compare runs of different benchmarks ({named})")
    differing: list[str] = []
    keys = sorted({k for r in runs for k in r.identity} - PER_MODEL - {"data"})
    for key in keys:
        values = {json.dumps(r.identity.get(key), sort_keys=True) for r in runs}
        if len(values) > 1:
            shown = "; ".join(f"{r.path.name}: {r.identity.get(key)!r}" for r in runs)
            differing.append(f"{key} ({shown})")
    notes: list[str] = []
    if len({r.identity.get("data") for r in runs}) > 1:
        problem = _data_mismatch(runs)
        if problem:
            differing.append(problem)
        else:
            notes.append("the runs read their data from different paths, but the questions and answers agree")
    if differing:
        raise EvalkitError(f"cannot compare {first.identity.get('benchmark')} runs with different settings: "
                           + " · ".join(differing))
    notes += _snapshot_notes(runs)
    for key in sorted(PER_MODEL - {"model", "endpoint", "cache_tag"}):
        values = {json.dumps(r.identity.get(key), sort_keys=True) for r in runs}
        if len(values) > 1:
            notes.append(f"{key} differs between models: "
                         + ", ".join(f"{r.label}: {r.identity.get(key)}" for r in runs))
    return notes


def _snapshot_notes(runs: Sequence[LoadedRun]) -> list[str]:
    """Runs of one model name answered by different snapshots (the model behind a name changed), and runs
    whose official mode follows different sources: said, since their numbers may differ for that alone."""
    notes = []
    by_model: dict[str, list[LoadedRun]] = {}
    for r in runs:
        by_model.setdefault(str(r.identity.get("model")), []).append(r)
    for model, same in by_model.items():
        seen = {r.path.name: sorted((r.summary.get("provenance") or {}).get("served_by") or {}) for r in same}
        if len({json.dumps(v) for v in seen.values() if v}) > 1:
            notes.append(f"{model} was answered by different snapshots: "
                         + "; ".join(f"{name}: {', '.join(v) or 'not said'}" for name, v in seen.items()))
    sources = {r.summary.get("official_source") for r in runs if r.summary.get("official_source")}
    if len(sources) > 1:
        notes.append("the runs follow different official sources: " + "; ".join(sorted(sources)))
    return notes


def _data_mismatch(runs: Sequence[LoadedRun]) -> str | None:
    """Different data paths are fine when the questions (ids) and gold answers agree."""
    golds = [{rec.query_id: rec.gold for rec in r.records} for r in runs]
    for run, gold in zip(runs[1:], golds[1:], strict=True):
        common = gold.keys() & golds[0].keys()
        if not common:
            return f"data (no question in common between {runs[0].path.name} and {run.path.name})"
        wrong = sum(1 for q in common if gold[q] != golds[0][q])
        if wrong:
            return f"data ({wrong} questions have different answers in {runs[0].path.name} and {run.path.name})"
    return None


class Comparison(Leaderboard):
    """The leaderboard `compare` returns (`evalkit.Comparison`): the data, and writing its report."""

    def write(self, out: Path, plots: bool = True, plotter: Plotter | None = None) -> Path:
        """report.md, comparison.json and (unless plots=False) plots/*.png in `out`; returns the report's path.
        `plotter`: a child process that draws the plots (report/plot_process.py), else drawn here."""
        self.out_dir = Path(out)
        return write_comparison(self, self.out_dir, plots, plotter)


def compare(run_dirs: Sequence[str | Path], *, out: str | Path | None = None, sizes: str | Path | None = None,
            n_boot: int = N_BOOT, seed: int = 0, alpha: float = 0.05,
            labels: Mapping[Path, str] | None = None, plots: bool = True,
            until_decided: Sequence[Mapping[str, Any]] | None = None) -> Comparison:
    """Compare finished runs of one benchmark; with `out`, also write the report there (its plots too,
    unless plots=False). `labels`: a name for a run directory's model other than its PROVIDER/MODEL
    (a matrix's model labels). `until_decided`: the pairs' decisions as an `--until-decided` matrix
    made them (multi/deciding.py's entries); else read from the runs' "sample" blocks."""
    if len(run_dirs) < 2:
        raise EvalkitError("compare needs at least two run directories")
    damage: list[str] = []
    runs = [load_run(Path(p), damage) for p in run_dirs]
    for run in runs:
        run.label = (labels or {}).get(run.path, run.label)
    label_all(runs)
    counts = {r.label: n_repeats(r.summary) for r in runs}
    every = {r.label: r.records for r in runs}  # records of every repeat
    for run in runs:  # the analysis (categories, confusion, ...) and the checks read repeat 0, each run's headline
        run.records = [rec for rec in run.records if not rec.repeat]
    notes = check_compatible(runs) + damage
    lacking = _lacking(runs)
    common = restrict_to_common(runs, every)
    bench_name = str(runs[0].identity["benchmark"])
    bench = get_benchmark(bench_name)
    options = runs[0].options
    results = [analyze(r.label, bench, r.records, options, n_boot=0, seed=seed, chance=r.summary.get("chance_pct"),
                       category_chance=r.summary.get("chance_per_category")) for r in runs]
    common_k = min(counts.values())  # the repeats every run has (docs/repeats.md)
    if common_k >= 2:  # ranked on the mean over them; tests on per-item mean correctness
        for m in results:
            m.repeats, m.table = over_repeats(bench, every[m.label], options, common_k, counts[m.label])
    spreads = {m.label: m.repeats for m in results if m.repeats is not None}
    notes += [note] if (note := compare_note(bench.headline_for(options), counts, spreads)) else []
    tables = {m.label: m.table for m in results if m.table is not None and m.table.n}
    draws = resample(tables, n_boot=n_boot, seed=seed) if n_boot > 0 and same_observations(tables) else None
    for m in results:
        if m.label in tables:  # every model's interval from the same resamples as the paired tests
            m.ci = bootstrap_ci(tables[m.label], n_boot=n_boot, seed=seed,
                                draws=draws[m.label] if draws else None)
            mean = m.repeats.mean.get(m.table.metric) if m.repeats else None
            if mean is not None:  # the mean of the repeats' official headlines (their tables' mean when complete)
                m.ci = replace(m.ci, estimate=mean)
    results.sort(key=lambda m: (-(m.estimate if m.estimate is not None else float("-inf")), m.label))
    pairs = all_pairs({m.label: tables[m.label] for m in results if m.label in tables}, n_boot=n_boot,
                      seed=seed, alpha=alpha, draws=draws)
    _note_coverage(runs, notes, lacking)
    correlation = None
    if sizes is not None:
        scores = {m.label: m.estimate for m in results if m.estimate is not None}
        correlation = size_correlation(scores, load_sizes(Path(sizes)))
    settings = {k: v for k, v in runs[0].identity.items() if k not in PER_MODEL}
    decided = decided_pairs(runs, until_decided)
    if decided is not None and any(r.summary.get("stopped") == "sample" for r in runs):
        notes.append(SEQUENTIAL_NOTE)
    comparison = Comparison(bench_name, settings, results, {r.label: r for r in runs}, pairs, correlation, notes,
                            repeats=CommonRepeats(common_k, counts) if common_k >= 2 else None, common=common,
                            decided=decided)
    if out is not None:
        comparison.write(Path(out), plots)
    return comparison


SEQUENTIAL_NOTE = ("the runs stopped once their pairs were decided (--until-decided): the pairwise tests above are "
                   "fixed-sample tests, which stopping on the results makes optimistic; the until-decided "
                   "decisions (anytime p-values, Holm over the pairs) are the ones that hold")


def decided_pairs(runs: Sequence[LoadedRun], given: Sequence[Mapping[str, Any]] | None = None
                  ) -> list[DecidedPair] | None:
    """Each pair's `--until-decided` decision: `given` (a matrix's own), else the latest the runs' "sample"
    blocks say (the entry with the most items); a pair is named by its two run directories. None: no pair
    of these runs was run until decided."""
    label_of = {r.path.name: r.label for r in runs}
    entries: list[Mapping[str, Any]] = list(given or ())
    if given is None:
        for run in runs:
            block = run.summary.get("sample")
            if isinstance(block, dict) and block.get("rule") == "until-decided":
                entries += [{**e, "of": block.get("of")} for e in block.get("pairs") or () if isinstance(e, dict)]
    found: dict[frozenset[str], DecidedPair] = {}
    for e in entries:
        try:
            a, b = (str(x) for x in e["runs"])
            if a not in label_of or b not in label_of:
                continue
            lo, hi = (float(x) for x in e["interval"])
            pair = DecidedPair(label_of[a], label_of[b], int(e["items"]), e.get("decided"),
                               None if e.get("at") is None else int(e["at"]), float(e["difference"]), (lo, hi),
                               float(e["p_value"]), int(e["of"]))
        except (KeyError, TypeError, ValueError):
            continue  # a block this evalkit did not write: left out
        key = frozenset((a, b))
        if key not in found or pair.items > found[key].items:
            found[key] = pair
    return list(found.values()) or None


def _lacking(runs: Sequence[LoadedRun]) -> dict[str, int]:
    """How many queries each run has no record of that some other run has."""
    ids = [{rec.query_id for rec in r.records} for r in runs]
    union = set.union(*ids)
    return {run.label: len(union - mine) for run, mine in zip(runs, ids, strict=True)}


def restrict_to_common(runs: Sequence[LoadedRun], every: dict[str, list[Record]]) -> CommonItems | None:
    """When some run has no record of queries another run has (a run stopped early: 228 of 1,624 asked),
    keep in every run, and in `every` (each run's records of every repeat), only the items every run has
    a record of for each of the item's queries, so the models are ranked on the same questions; None
    when the runs hold the same queries (nothing is left out). A failed query has its record and counts
    as wrong, as in the official numbers. No item in common is an EvalkitError naming the runs."""
    recorded = [{rec.query_id for rec in r.records} for r in runs]
    union = set.union(*recorded)
    if all(len(ids) == len(union) for ids in recorded):
        return None
    by_item: dict[str, set[str]] = {}
    for run in runs:
        for rec in run.records:
            by_item.setdefault(rec.base_id, set()).add(rec.query_id)
    keep = {item for item, qids in by_item.items() if all(qids <= ids for ids in recorded)}
    if not keep:
        fewest = min(runs, key=lambda r: len(r.records))
        raise EvalkitError(f"no item was answered by every run ({fewest.path.name} has {len(fewest.records):,} "
                           f"answers, none to items the others all have); finish the runs (re-run their commands) "
                           "and compare again")
    for run in runs:
        run.records = [rec for rec in run.records if rec.base_id in keep]
    for label in every:
        every[label] = [rec for rec in every[label] if rec.base_id in keep]
    return CommonItems(len(keep), len(by_item), sum(len(by_item[item]) for item in keep))


def _note_coverage(runs: Sequence[LoadedRun], notes: list[str], lacking: dict[str, int]) -> None:
    for run in runs:
        if lacking.get(run.label):
            notes.append(f"{run.label} has no record of {lacking[run.label]:,} queries that other runs have; "
                         "their items are left out for every model")
        if run.summary.get("stopped") == "sample":  # a sample by design (--until-ci, --until-decided): not a failure
            notes.append(f"{run.label}: {sample_line(run.summary) or 'a sample'}; the same command without the "
                         "flag goes on toward the whole set")
        elif not run.complete:
            done, n = run.answered
            notes.append(f"{run.label}: the run is incomplete ({run.summary.get('missing', 0)} queries missing, "
                         f"{(run.summary.get('counts') or {}).get('errors', 0)} errors): {done:,} of {n:,} "
                         "answered; failed queries count as wrong, as in its official numbers; re-run it to "
                         "complete")
