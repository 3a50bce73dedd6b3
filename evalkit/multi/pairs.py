"""The pairs of a model x benchmark matrix and the options each pair's run is given.

Options as `evalkit.run` takes them (the flags) override the suite file's values; a benchmark's own
option goes to that benchmark's pairs only. Refused, in one line, before anything runs: --data or
--images with several benchmarks (each benchmark's data is its registry source or the suite's),
--base-url with more than one model that takes a server URL (each model's base_url goes in the
suite), a benchmark or model named twice, an option no benchmark of the matrix knows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from evalkit.benchmarks import benchmark_class, option_owners
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import HOOKS, RunConfig, field_names, unknown_option
from evalkit.core.text.shown import shown_text
from evalkit.multi.suite import BenchEntry, ModelEntry, bench_entry, model_entry, read_suite
from evalkit.providers.registry import find


@dataclass(frozen=True)
class Pair:
    bench: str
    model: str  # PROVIDER/MODEL
    shown: str  # the model as the display, the messages and the comparison name it (its label, else its spec)
    options: dict[str, Any]  # the run's options: settings and the benchmark's own, no hooks

    @property
    def label(self) -> str:
        return f"{self.bench} · {self.shown}"


def plan_pairs(benches: Sequence[Any], models: Sequence[Any], suite: str | Path | None,
               options: Mapping[str, Any]) -> tuple[list[Pair], Path]:
    """Every (benchmark, model) pair, benchmark by benchmark, and the folder their runs go in (`out`, else runs/)."""
    file = read_suite(suite) if suite is not None else None
    bench_list = _chosen([bench_entry(b) for b in benches], file.benchmarks if file else [], lambda e: e.name)
    model_list = _chosen([model_entry(m) for m in models], file.models if file else [], lambda e: e.spec)
    if not bench_list:
        raise EvalkitError("no benchmark: name one (evalkit run BENCH ...) or list them in a --suite file")
    if not model_list:
        raise EvalkitError("no model: give --model PROVIDER/MODEL or list [[models]] in a --suite file")
    _no_twice(bench_list, model_list)
    flags = {k: v for k, v in options.items() if k not in HOOKS and v is not None}
    run_names = set(field_names(RunConfig)) - {"model"}
    owners: dict[str, list[str]] = {}
    for b in bench_list:
        for f in fields(benchmark_class(b.name).Options):
            owners.setdefault(f.name, []).append(b.name)
    names = ", ".join(b.name for b in bench_list)
    for key in flags:
        if key not in run_names and key not in owners:
            raise unknown_option(key, sorted(run_names | set(owners)), option_owners(), names)
    for key in ("data", "images"):
        if len(bench_list) > 1 and flags.get(key):
            raise EvalkitError(f"--{key} with several benchmarks ({names}): each benchmark's {key} goes in a --suite "
                               f"file ([[benchmarks]] name = ..., {key} = ...)")
    url_to = _base_url_takers(model_list) if flags.get("base_url") else set()
    root = Path(flags.get("out") or "runs")
    pairs = []
    for b in bench_list:
        for m in model_list:
            opts: dict[str, Any] = {k: v for k, v in (("data", b.data), ("images", b.images)) if v is not None}
            opts.update(b.options)
            opts.update(m.settings)
            opts.update({k: v for k, v in flags.items() if k in run_names and k not in ("out", "base_url")})
            if m.spec in url_to:
                opts["base_url"] = flags["base_url"]
            opts.update({k: v for k, v in flags.items() if b.name in owners.get(k, ())})
            pairs.append(Pair(b.name, m.spec, m.shown, opts))
    return pairs, root


def _chosen(named: list[Any], listed: list[Any], key: Any) -> list[Any]:
    """The entries named on the command line, each a bare name taking the suite's settings for that
    name, if the suite has it; none named: the suite's."""
    if not named:
        return listed
    in_file: dict[str, Any] = {}
    for entry in listed:
        in_file.setdefault(key(entry), entry)
    return [in_file.get(key(e), e) if e == type(e)(key(e)) else e for e in named]


def _no_twice(benches: list[BenchEntry], models: list[ModelEntry]) -> None:
    seen: set[str] = set()
    for b in benches:
        if b.name in seen:
            raise EvalkitError(f"benchmark {b.name} is named twice; a matrix runs each benchmark once")
        seen.add(b.name)
    shown: set[str] = set()
    same: set[str] = set()
    for m in models:
        settings = repr(sorted(m.settings.items()))
        if m.spec + settings in same:
            raise EvalkitError(f"model {shown_text(m.spec)} is named twice with the same settings; a matrix runs each once")
        if m.shown in shown:
            raise EvalkitError(f"two models are labelled '{m.shown}': give each its own label (a label shows as its "
                               "first 80 characters)")
        same.add(m.spec + settings)
        shown.add(m.shown)


def takes_base_url(spec: str) -> bool:
    """A model served from a server of one's own (vllm/, openai-compatible/, azure/): its URL says which."""
    record = find(spec.partition("/")[0])
    return record is not None and (record.default_url is None or record.default_in_endpoint)


def _base_url_takers(models: list[ModelEntry]) -> set[str]:
    """The model --base-url goes to: the only model, or the only one that takes a server URL."""
    if len(models) == 1:
        return {models[0].spec}
    takers = [m.spec for m in models if takes_base_url(m.spec)]
    if len(takers) == 1:
        return set(takers)
    which = f"{len(takers)} models take a server URL ({', '.join(takers)})" if takers else \
        "no model takes a server URL of its own"
    raise EvalkitError(f"--base-url with several models: {which}; give each model its base_url in a --suite file "
                       "([[models]] spec = ..., base_url = ...)")
