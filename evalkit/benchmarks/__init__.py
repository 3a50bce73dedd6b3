"""The benchmark registry: names on the command line -> Benchmark classes.

A plain mapping filled at import (no registration side effects), so `evalkit list`
and error messages always show the same set.
"""

from __future__ import annotations

from evalkit.benchmarks.base import Benchmark, JudgeRequest
from evalkit.benchmarks.ifbench import IFBench
from evalkit.benchmarks.mcq import MCQ
from evalkit.benchmarks.mmerealworld import MMERealWorld
from evalkit.benchmarks.rgbth import RGBThBench
from evalkit.benchmarks.tdbench import TDBench
from evalkit.core.errors import EvalkitError

REGISTRY: dict[str, type[Benchmark]] = {
    MCQ.name: MCQ,
    MMERealWorld.name: MMERealWorld,
    TDBench.name: TDBench,
    RGBThBench.name: RGBThBench,
    IFBench.name: IFBench,
}


def list_benchmarks() -> list[str]:
    """Registered benchmark names, sorted."""
    return sorted(REGISTRY)


def get_benchmark(name: str) -> Benchmark:
    """A fresh instance of the named benchmark; unknown names are a usage error listing the known ones."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise EvalkitError(f"unknown benchmark '{name}' (known: {', '.join(list_benchmarks())})")
    return cls()


__all__ = ["REGISTRY", "Benchmark", "JudgeRequest", "get_benchmark", "list_benchmarks"]
