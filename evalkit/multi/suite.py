"""What a model x benchmark matrix runs: its benchmarks and models, from the command line or a suite file.

    [[benchmarks]]
    name = "mcq"
    data = "sets/mine.tsv"            # optional: else the registry's (or mcq's demo set)
    options = { circular = true }     # the benchmark's own options, as its flags name them

    [[models]]
    spec = "vllm/Qwen2.5-VL-7B"
    label = "Qwen 7B"                 # optional: its name in the display and the comparison
    base_url = "http://gpu1:8000/v1"  # optional, also a list of replicas
    extra = { top_k = 1 }             # optional: merged into its request bodies
    reasoning_effort = "low"          # optional
    detail = "low"                    # optional (OpenAI-shaped endpoints); media_resolution for Gemini
    repeats = 3                       # optional

Values are validated as the flags are (one line naming the file, the entry and the key; exit 2).
What a message or the display repeats from the file (labels, names, keys) is escaped and shortened
(core/text/shown.py): a label holding ESC sequences or 50 MB of text is shown as 80 safe characters.
The TOML reader is imported only when a suite is read: `evalkit --help` stays light.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from evalkit.benchmarks import REGISTRY, benchmark_class
from evalkit.core import settings
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig
from evalkit.core.text.shown import shown_text, shown_value
from evalkit.providers.image_setting import check_image_setting
from evalkit.providers.reasoning import check_reasoning

BENCH_KEYS = ("name", "data", "images", "options")
MODEL_KEYS = ("spec", "label", "base_url", "extra", "reasoning_effort", "detail", "media_resolution", "repeats")


@dataclass(frozen=True)
class BenchEntry:
    """One benchmark of a matrix: its name, its data (None: the default) and its own options."""

    name: str
    data: str | None = None
    images: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelEntry:
    """One model of a matrix: PROVIDER/MODEL, its label, and its own run settings (base_url, extra,
    reasoning_effort, detail, media_resolution, repeats, as RunConfig names them)."""

    spec: str
    label: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def shown(self) -> str:
        """Its name in the display, the messages and the comparison: escaped and at most 80 characters."""
        return shown_text(self.label or self.spec)


@dataclass(frozen=True)
class Suite:
    benchmarks: list[BenchEntry]
    models: list[ModelEntry]


def _toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the dependency for older Pythons
        import tomli as tomllib
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvalkitError(f"--suite {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise EvalkitError(f"--suite {path}: cannot be read ({e})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise EvalkitError(f"--suite {path}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses per level of [[[…]]] or {a={…}}
        raise EvalkitError(f"--suite {path}: not valid TOML: nested too deeply") from None


def read_suite(path: str | Path) -> Suite:
    """The suite file's benchmarks and models, checked; EvalkitError (one line naming the file, the entry
    and the key) for anything the flags would refuse too."""
    path = Path(path)
    doc = _toml(path)
    for key in doc:
        if key not in ("benchmarks", "models"):
            raise EvalkitError(f"{path}: unknown key '{shown_text(key)}' (a suite has [[benchmarks]] and [[models]])")
    benches = [_bench(path, i, t) for i, t in enumerate(_tables(path, doc, "benchmarks"), start=1)]
    models = [_model(path, i, t) for i, t in enumerate(_tables(path, doc, "models"), start=1)]
    return Suite(benches, models)


def suite_benchmarks(path: str | Path) -> list[str]:
    """The benchmark names a suite file lists, for the parser to add their flags; [] when it cannot be read
    (the run then says why)."""
    try:
        doc = _toml(Path(path))
        return [t["name"] for t in doc.get("benchmarks", []) if isinstance(t, dict) and t.get("name") in REGISTRY]
    except (EvalkitError, AttributeError, TypeError):
        return []


def _tables(path: Path, doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise EvalkitError(f"{path}: '{key}' must be an array of tables ([[{key}]])")
    return value


def _unknown(path: Path, where: str, key: str, known: Sequence[str]) -> EvalkitError:
    return EvalkitError(f"{path}: {where}: unknown key '{shown_text(key)}' (known: {', '.join(known)})")


def _text(path: Path, where: str, table: Mapping[str, Any], key: str, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise EvalkitError(f"{path}: {where}: '{key}' is missing")
        return None
    if not isinstance(value, str) or not value:
        raise EvalkitError(f"{path}: {where}: '{key}' must be a non-empty string, not {shown_value(value)}")
    return value


def _where(kind: str, i: int, name: Any) -> str:
    """`[[models]] #2 (vllm/x)`: the entry, and its name when it has one."""
    return f"[[{kind}]] #{i}" + (f" ({shown_text(name)})" if isinstance(name, str) and name else "")


def _bench(path: Path, i: int, table: dict[str, Any]) -> BenchEntry:
    where = _where("benchmarks", i, table.get("name"))
    for key in table:
        if key not in BENCH_KEYS:
            raise _unknown(path, where, key, BENCH_KEYS)
    name = _text(path, where, table, "name", required=True)
    assert name is not None
    if name not in REGISTRY:
        raise EvalkitError(f"{path}: {where}: unknown benchmark (known: {', '.join(REGISTRY)})")
    options = table.get("options", {})
    if not isinstance(options, dict):
        raise EvalkitError(f"{path}: {where}: 'options' must be a table, e.g. options = {{ circular = true }}")
    known = [f.name for f in fields(benchmark_class(name).Options)]
    for key in options:
        if key not in known:
            raise EvalkitError(f"{path}: {where}: unknown option '{shown_text(str(key))}' of {name} "
                               f"(known: {', '.join(known) or 'none'})")
    _checked(path, where, lambda: settings.build(benchmark_class(name).Options, options))
    return BenchEntry(name, _text(path, where, table, "data"), _text(path, where, table, "images"), dict(options))


def _model(path: Path, i: int, table: dict[str, Any]) -> ModelEntry:
    where = _where("models", i, table.get("spec"))
    for key in table:
        if key not in MODEL_KEYS:
            raise _unknown(path, where, key, MODEL_KEYS)
    spec = _text(path, where, table, "spec", required=True)
    assert spec is not None
    own = {k: table[k] for k in MODEL_KEYS[2:] if k in table}
    _checked(path, where, lambda: _model_settings(spec, own))
    if isinstance(own.get("base_url"), str):
        own["base_url"] = (own["base_url"],)
    return ModelEntry(spec, _text(path, where, table, "label"), own)


def _model_settings(spec: str, own: dict[str, Any]) -> None:
    """A model table's settings as a run checks them: its RunConfig, and its reasoning switch and image
    resolution setting by its record."""
    config = settings.build(RunConfig, {"model": spec, **own})
    check_reasoning(config.model, config.reasoning_effort, config.thinking_budget)
    check_image_setting(config.model, config.detail, config.media_resolution)


def _checked(path: Path, where: str, build: Any) -> None:
    try:
        build()
    except EvalkitError as e:
        raise EvalkitError(f"{path}: {where}: {e}") from None


def bench_entry(value: str | BenchEntry | Mapping[str, Any]) -> BenchEntry:
    """A benchmark named by the Python API: a name, an entry, or a dict with a suite table's keys."""
    if isinstance(value, BenchEntry):
        return value
    if isinstance(value, str):
        if value not in REGISTRY:
            raise EvalkitError(f"unknown benchmark '{value}' (known: {', '.join(REGISTRY)})")
        return BenchEntry(value)
    return _bench(Path("<benchmarks>"), 1, dict(value))


def model_entry(value: str | ModelEntry | Mapping[str, Any]) -> ModelEntry:
    """A model named by the Python API: a spec, an entry, or a dict with a suite table's keys."""
    if isinstance(value, ModelEntry):
        return value
    if isinstance(value, str):
        return ModelEntry(value)
    return _model(Path("<models>"), 1, dict(value))
