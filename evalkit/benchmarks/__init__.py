"""The benchmark registry: one line per benchmark, naming its module and class.

Entries are plain strings, so `evalkit list`, `evalkit --help` and `evalkit run BENCH --help`
read names and descriptions without importing any benchmark module; a benchmark's module is
imported only when that benchmark is used. Adding a benchmark = one module + one line here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING

from evalkit.core.errors import EvalkitError

if TYPE_CHECKING:
    from evalkit.benchmarks.base import Benchmark


@dataclass(frozen=True)
class Entry:
    name: str
    target: str  # "module:Class"
    description: str


REGISTRY: dict[str, Entry] = {e.name: e for e in (
    Entry("mcq", "evalkit.benchmarks.mcq:MCQ", "any multiple-choice set in VLMEvalKit TSV or JSONL form"),
    Entry("mme-realworld", "evalkit.benchmarks.mmerealworld:MMERealWorld",
          "high-resolution real-world 5-option MCQ (official JSON or VLMEvalKit TSV)"),
    Entry("tdbench", "evalkit.benchmarks.tdbench:TDBench",
          "TDBench: top-down images, RotationalEval (RE/VE/MA) and reliability (θ, r, g)"),
    Entry("rgb-th-bench", "evalkit.benchmarks.rgbth:RGBThBench",
          "RGB-thermal pairs, Yes/No questions, question- and skill-level accuracy"),
    Entry("if-bench", "evalkit.benchmarks.ifbench:IFBench",
          "IF-Bench infrared MCQ: circular x EN/CN, first-character judgment, strict score, GenViP"),
    Entry("pope", "evalkit.benchmarks.pope:POPE",
          "POPE-style yes/no object probing: accuracy, precision, recall, F1, yes-ratio"),
)}


def list_benchmarks() -> list[str]:
    """Registered benchmark names, sorted."""
    return sorted(REGISTRY)


def benchmark_class(name: str) -> type[Benchmark]:
    """Import the named benchmark's module and check the class honours the contract."""
    entry = REGISTRY.get(name)
    if entry is None:
        raise EvalkitError(f"unknown benchmark '{name}' (known: {', '.join(list_benchmarks())})")
    module, _, cls_name = entry.target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    check_contract(cls, name)
    return cls


def check_contract(cls: type[Benchmark], name: str) -> None:
    """What a registered benchmark must declare; a mistake fails at registration, not silently."""
    problems = []
    if cls.name != name:
        problems.append(f"name is '{cls.name}', registered as '{name}'")
    if not isinstance(cls.headline_metric, str) or not cls.headline_metric:
        problems.append("no headline_metric declared")
    opts = cls.Options
    if not (is_dataclass(opts) and opts.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        problems.append("Options is not a frozen dataclass")
    else:
        for f in fields(opts):
            if "help" not in f.metadata:
                problems.append(f"option '{f.name}' is not declared with settings.option(...)")
    if problems:
        raise TypeError(f"benchmark {cls.__module__}.{cls.__name__}: " + "; ".join(problems))


def get_benchmark(name: str) -> Benchmark:
    """A fresh instance of the named benchmark; unknown names are a usage error listing the known ones."""
    return benchmark_class(name)()


def option_owners() -> dict[str, str]:
    """Option name -> the benchmark that declares it (imports every benchmark: error paths only)."""
    owners: dict[str, str] = {}
    for name in REGISTRY:
        for f in fields(benchmark_class(name).Options):
            owners.setdefault(f.name, name)
    return owners


__all__ = ["REGISTRY", "Entry", "benchmark_class", "get_benchmark", "list_benchmarks", "option_owners"]
