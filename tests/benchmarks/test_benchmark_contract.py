"""The contract every registered benchmark honours, checked for all of them with no per-benchmark code.

For each name in the registry: the class passes `check_contract` and its options can all be left
at their defaults; its bundled sample runs end to end against the simulated server (load,
expand, answer key, ask, parse, score, aggregate, report) for two simulated models, the
headline it declares is in summary.json and equals its ScoreTable's estimate, and
`evalkit compare` ranks the two runs. Across benchmarks: option names and flags are unique,
and registering a new benchmark with a defaulted option moves no other benchmark's run identity.

Plots are stubbed out (they cost about a second each and test_plots covers them) and the
reliability fit memoised (see `fast_reports`); LIMIT items per benchmark keep the file fast.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

import evalkit.benchmarks as registry
from evalkit.benchmarks import Entry, benchmark_class, check_contract, get_benchmark, list_benchmarks
from evalkit.benchmarks.base import Benchmark
from evalkit.benchmarks.run_settings import resolve_settings
from evalkit.core.record import Record
from evalkit.core.resources import dataset_path
from evalkit.core.settings import ROLES, RunConfig, flag_of, option
from evalkit.core.types import Item, Query
from evalkit.engine.evaluate import run
from evalkit.multi.compare import compare
from evalkit.rundir.identity import run_identity
from evalkit.rundir.layout import RunDir
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

BENCHES = list_benchmarks()
LIMIT = 3
MODEL = "vllm/sim-model"
# A perfect model, and a noisy one in mixed wording (some replies need the judge: left unparsed here).
MODELS = {"perfect": SimParams(), "noisy": SimParams(theta=0.5, r=0.8, seed=5, style="mixed")}


_FITS: dict[tuple[Any, ...], tuple[Any, float]] = {}


@pytest.fixture
def fast_reports(monkeypatch):
    """No plots, and the reliability fit memoised. The fit is a pure function of a histogram, and a
    bootstrap over a few variant groups draws the same few histograms again and again (200 times
    per fit, and the fit is redone by aggregate, by the report and by compare): same numbers,
    seconds instead of tens of seconds on benchmarks with variant groups."""
    import evalkit.metrics.reliability as reliability

    fit_once = reliability._fit_once

    def memo(hist: Any, starts: Any) -> tuple[Any, float]:
        key = (tuple(map(float, hist)), tuple(tuple(map(float, s)) for s in starts))
        if key not in _FITS:
            _FITS[key] = fit_once(hist, starts)
        params, nll = _FITS[key]
        return params.copy(), nll

    monkeypatch.setattr(reliability, "_fit_once", memo)
    monkeypatch.setattr("evalkit.report.figures.draw_all", lambda *a, **k: [])


# ---------------------------------------------------------------------------------------
# Declarations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BENCHES)
def test_declarations(name):
    cls = benchmark_class(name)
    check_contract(cls, name)
    assert registry.REGISTRY[name].description.strip()
    options = cls.Options()  # every option has a default: a run needs no benchmark flag
    for f in dataclasses.fields(options):
        assert f.metadata["role"] in ROLES and f.metadata["help"].strip(), f"{name}: option {f.name}"
    if cls.default_data is not None:
        assert dataset_path(cls.default_data).exists(), f"{name}: bundled sample {cls.default_data} is missing"
    bench = cls()
    assert isinstance(bench.headline_for(settings_dict(name)), str)


def test_check_contract_rejects_bad_declarations():
    @dataclasses.dataclass
    class Loose:
        x: int = 1

    class Bad(Benchmark):
        name = "other"
        Options = Loose

    with pytest.raises(TypeError) as err:
        check_contract(Bad, "bad")
    message = str(err.value)
    assert "registered as 'bad'" in message and "no headline_metric" in message and "not a frozen" in message


def test_option_names_and_flags_are_unique_across_benchmarks():
    """API keywords share one namespace with RunConfig's, and CLI flags with its flags."""
    names = {f.name: "run" for f in dataclasses.fields(RunConfig)}
    flags = {flag_of(f): "run" for f in dataclasses.fields(RunConfig)} | {"--model": "run", "--help": "argparse"}
    for bench in BENCHES:
        for f in dataclasses.fields(benchmark_class(bench).Options):
            assert f.name not in names, f"option {f.name} of {bench} is also declared by {names[f.name]}"
            assert flag_of(f) not in flags, f"flag {flag_of(f)} of {bench} is also declared by {flags[flag_of(f)]}"
            names[f.name] = flags[flag_of(f)] = bench


# Benchmarks known to break a contract check below, with why: each entry is an expected failure
# (strict, so fixing the benchmark turns it red until the entry is removed). Keep it empty.
KNOWN_GAPS: dict[tuple[str, str], str] = {}


def _gap(check: str, name: str) -> Any:
    reason = KNOWN_GAPS.get((check, name))
    return pytest.param(name, marks=pytest.mark.xfail(reason=reason, strict=True)) if reason else name


@pytest.mark.parametrize("name", [_gap("limits", n) for n in BENCHES])
def test_run_limits_reach_every_query(name):
    """What `make_query` guarantees: the run's image limits and generation settings are on every query."""
    from evalkit.benchmarks.prepare import prepare

    queries = prepare(name, settings_dict(name, limit=2, max_side=77, max_pixels=5000, max_tokens=33)).queries
    assert queries
    assert {q.params.max_tokens for q in queries} == {33}
    parts = [p for q in queries for p in q.image_parts()]
    assert parts and {(p.transform.max_side, p.transform.max_pixels) for p in parts} == {(77, 5000)}


# ---------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------


def settings_dict(name: str, **given: Any) -> dict[str, Any]:
    """The flat options dict the benchmark's methods see in a run given these keywords."""
    return resolve_settings(name, MODEL, {"data": "sample", **given}).bench_dict()


def check_run(name: str, out: Path, options: dict[str, Any]) -> tuple[str, float | None]:
    """The run directory's files, and its headline: in summary.json, equal to the ScoreTable's estimate."""
    bench = get_benchmark(name)
    assert (out / "report.md").is_file() and (out / "summary.json").is_file()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    records = list(RunDir(out).load_records().values())
    assert len(records) == summary["n_queries"] > 0 and summary["missing"] == 0
    assert summary["counts"]["errors"] == 0
    metric = bench.headline_for(options)
    assert metric in summary["metrics"], f"{name}: headline {metric} not in {sorted(summary['metrics'])}"
    value = summary["metrics"][metric]
    table = bench.score_table(records, options)
    if table is not None:
        assert table.metric == metric
        assert len(table.units) == len(table.values) == len(table.keys)
        assert value is not None and abs(table.estimate() - value) <= 1e-9, (name, table.estimate(), value)
        assert summary["headline"]["metric"] == metric and abs(summary["headline"]["value"] - value) <= 1e-9
    assert metric in (out / "report.md").read_text(encoding="utf-8")
    return metric, value


@pytest.mark.parametrize("name", BENCHES)
def test_sample_runs_end_to_end_and_compares(name, tmp_path, fast_reports):
    options = settings_dict(name, limit=LIMIT)
    key = answer_key_for(name, {"data": "sample", "limit": LIMIT})
    assert len(key) > 0
    outs = {}
    for label, params in MODELS.items():
        with SimThread(SimConfig(answer_key=key, params=params)) as sim:
            res = run(name, MODEL, data="sample", base_url=sim.url, out=str(tmp_path / label), cache_dir=str(tmp_path / "cache"),
                      progress=False, limit=LIMIT)
        assert res.summary["n_queries"] == len(key)  # the key holds every query the run asked
        outs[label] = check_run(name, tmp_path / label, options)
    comparison = compare([tmp_path / label for label in MODELS], n_boot=50)
    assert comparison.benchmark == name and len(comparison.results) == 2
    by_dir = {comparison.runs[r.label].path.name: r for r in comparison.results}
    for label, (metric, value) in outs.items():
        result = by_dir[label]
        if result.table is not None:  # the leaderboard's number is the run's own headline
            assert result.metric == metric and abs(result.estimate - value) <= 1e-9
    assert len(comparison.pairs) == (1 if all(r.table is not None for r in comparison.results) else 0)


# ---------------------------------------------------------------------------------------
# Identity drift
# ---------------------------------------------------------------------------------------


class DriftProbe(Benchmark):
    """A benchmark registered only by the drift test: defaulted options of every kind."""

    name = "zz-drift-probe"
    headline_metric = "accuracy"

    @dataclasses.dataclass(frozen=True)
    class Options:
        zz_probe_switch: bool = option(False, help="zz-drift-probe: a defaulted switch")
        zz_probe_level: int = option(3, help="zz-drift-probe: a defaulted number", choices=(1, 3))
        zz_probe_name: str | None = option(help="zz-drift-probe: a defaulted name")

    def load(self, data: Path, images: Path | None, options: dict[str, Any]) -> list[Item]:
        return []

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        return []

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        return {}


def _identities() -> dict[str, dict[str, Any]]:
    """Each registered benchmark's run identity under its default options (API and CLI paths)."""
    from evalkit.cli import build_parser
    from evalkit.core import settings

    out = {}
    for name in BENCHES:
        s = resolve_settings(name, MODEL, {})
        out[name] = run_identity(name, s.options, s.config, MODEL, "http://sim", "0" * 64)
        args = build_parser(["run", name]).parse_args(["run", name, "--model", MODEL])
        given = {**settings.given(args, RunConfig), **settings.given(args, benchmark_class(name).Options)}
        given.pop("model", None)
        c = resolve_settings(name, MODEL, given)
        out[name + " (cli)"] = run_identity(name, c.options, c.config, MODEL, "http://sim", "0" * 64)
    return out


def test_registering_a_benchmark_moves_no_other_identity(monkeypatch):
    before = _identities()
    entry = Entry(DriftProbe.name, f"{DriftProbe.__module__}:DriftProbe", "drift probe")
    monkeypatch.setitem(registry.REGISTRY, DriftProbe.name, entry)
    assert DriftProbe.name in list_benchmarks() and benchmark_class(DriftProbe.name) is DriftProbe
    assert registry.option_owners()["zz_probe_switch"] == DriftProbe.name
    assert _identities() == before
    # the probe's own identity holds an option only when it leaves its default
    probe = resolve_settings(DriftProbe.name, MODEL, {"zz_probe_level": 3})
    assert "zz_probe_level" not in run_identity(DriftProbe.name, probe.options, probe.config, MODEL, "e", "0")
    moved = resolve_settings(DriftProbe.name, MODEL, {"zz_probe_level": 1})
    assert run_identity(DriftProbe.name, moved.options, moved.config, MODEL, "e", "0")["zz_probe_level"] == 1
