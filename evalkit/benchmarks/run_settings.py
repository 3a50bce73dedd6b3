"""The settings of one `evalkit.run` call, validated: the run's RunConfig, the benchmark's own
Options, the hooks, and the options exactly as given (0.1.0's run identity was computed from those).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from evalkit.benchmarks import benchmark_class, option_owners
from evalkit.core.settings import HOOKS, RunConfig, build, field_names, non_default, unknown_option


@dataclass(frozen=True)
class RunSettings:
    bench_name: str
    config: RunConfig
    options: Any  # the benchmark's Options instance
    hooks: dict[str, Any]
    given: dict[str, Any]  # the settings as given (no hooks, no model), for 0.1.0's identity

    def options_dict(self) -> dict[str, Any]:
        """The benchmark options that differ from their defaults (what config.json shows)."""
        return non_default(self.options)

    def bench_dict(self) -> dict[str, Any]:
        """The flat dict the benchmark's methods read: its options plus the run's data, limit,
        mode and generation settings."""
        return {**asdict(self.config), **{f.name: getattr(self.options, f.name) for f in fields(self.options)}}


def resolve_settings(bench: str, model: str, options: Mapping[str, Any]) -> RunSettings:
    """Split and check keyword options. Unknown names (with the closest valid ones, or the benchmark
    they belong to) and wrong types are errors naming the option; nothing has been written yet."""
    cls = benchmark_class(bench)
    run_names = set(field_names(RunConfig)) - {"model"}
    bench_names = set(field_names(cls.Options))
    hooks = {k: v for k, v in options.items() if k in HOOKS}
    unknown = [k for k in options if k not in run_names | bench_names | set(HOOKS)]
    if unknown:
        raise unknown_option(unknown[0], sorted(run_names | bench_names), _owners_except(bench), bench)
    run_given = {k: v for k, v in options.items() if k in run_names}
    bench_given = {k: v for k, v in options.items() if k in bench_names}
    config = build(RunConfig, {"model": model, **run_given})
    # a value the settings read as no value (`detail="auto"`) is not given: 0.1.0's identity did not have it
    normalised = {k for k, v in run_given.items() if v is not None and getattr(config, k) is None}
    return RunSettings(bench, config, build(cls.Options, bench_given), hooks,
                       {k: v for k, v in options.items() if k not in HOOKS and k not in normalised})


def _owners_except(bench: str) -> dict[str, str]:
    return {k: v for k, v in option_owners().items() if v != bench}
