"""A user's price file (`--prices FILE`): read and checked here, so a bad entry is one line naming the file and
the model before anything is sent; evalkit.money.pricing turns each entry into a `Price`.

The shape (USD per million tokens):

    {"openai-compatible/my-model": {"input": 0.1, "output": 0.4, "cached_input": 0.05,
                                    "tiers": {"flex": {"input": 0.05, "output": 0.2},
                                              "priority": {"input": 0.2, "output": 0.8, "cached_input": 0.1}}}}

`tiers` (issue 45) gives the model's price at a service tier, for a model whose provider's record has no share
for it (an openai-compatible server's flex, priority on a model outside OpenAI's priority table) or to replace
the share; a tier's own `cached_input` left out bills its cached tokens at its input rate (an upper bound).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.tiers import STANDARD, TIERS

FIELDS = {"input", "output", "cached_input", "batch_input", "batch_output", "source", "read_on", "note", "tiers"}
TIER_FIELDS = {"input", "output", "cached_input"}
PRICED_TIERS = tuple(t for t in TIERS if t != STANDARD)  # standard is the entry's own input/output


@dataclass(frozen=True)
class FilePrice:
    """One entry of a price file, checked: its rates, and its tiers' rows (tier, input, cached input, output)."""

    input: float
    output: float
    cached_input: float | None
    batch_input: float | None
    batch_output: float | None
    source: str
    read_on: str
    note: str
    tiers: tuple[tuple[str, float, float | None, float], ...] = ()


def read_price_file(path: Path) -> dict[tuple[str, str], FilePrice]:
    """Every entry of the file by (provider, model); an EvalkitError naming the file (and entry) when it is bad."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise EvalkitError(f"cannot read price file {path}: {e.strerror or e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise EvalkitError(f"price file {path}: not valid JSON ({e.msg} at line {e.lineno})") from e
    if not isinstance(data, dict):
        raise EvalkitError(f'price file {path}: expected an object like {{"openai/gpt-4o": {{...}}}}')
    out: dict[tuple[str, str], FilePrice] = {}
    for key, entry in data.items():
        provider, _, name = str(key).partition("/")
        if not provider or not name:
            raise EvalkitError(f"price file {path}: entry '{key}' must be named provider/model")
        out[(provider, name)] = _entry(f"price file {path}, entry '{key}'", path, entry)
    return out


def _rate(where: str, entry: dict[str, Any], name: str, required: bool, label: str = "") -> float | None:
    value = entry.get(name)
    label = label or name
    if value is None:
        if required:
            raise EvalkitError(f"{where}: '{label}' (USD per million tokens) is required")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise EvalkitError(f"{where}: '{label}' must be a non-negative number, got {value!r}")
    return float(value)


def _entry(where: str, path: Path, entry: Any) -> FilePrice:
    if not isinstance(entry, dict):
        raise EvalkitError(f'{where}: expected an object like {{"input": 2.5, "output": 10}}')
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise EvalkitError(f"{where}: unknown field(s) {', '.join(unknown)} (use {', '.join(sorted(FIELDS))})")
    for text_field in ("source", "read_on", "note"):
        if text_field in entry and not isinstance(entry[text_field], str):
            raise EvalkitError(f"{where}: '{text_field}' must be a string")
    return FilePrice(input=_rate(where, entry, "input", True) or 0.0, output=_rate(where, entry, "output", True) or 0.0,
                     cached_input=_rate(where, entry, "cached_input", False),
                     batch_input=_rate(where, entry, "batch_input", False),
                     batch_output=_rate(where, entry, "batch_output", False),
                     source=entry.get("source") or str(path), read_on=entry.get("read_on") or "user file",
                     note=entry.get("note") or "", tiers=_tiers(where, entry.get("tiers")))


def _tiers(where: str, tiers: Any) -> tuple[tuple[str, float, float | None, float], ...]:
    """The entry's `tiers`: {tier: {"input", "output", "cached_input"?}} for flex and priority."""
    if tiers is None:
        return ()
    if not isinstance(tiers, dict):
        raise EvalkitError(f"{where}: 'tiers' must be an object like "
                           '{"flex": {"input": 0.05, "output": 0.2}}, got ' + repr(tiers))
    rows = []
    for tier, rates in tiers.items():
        if tier == STANDARD:
            raise EvalkitError(f"{where}: 'tiers.standard': the standard price is the entry's own input and output")
        if tier not in PRICED_TIERS:
            raise EvalkitError(f"{where}: 'tiers' names the unknown tier {tier!r} (use {', '.join(PRICED_TIERS)})")
        if not isinstance(rates, dict):
            raise EvalkitError(f'{where}: \'tiers.{tier}\' must be an object like {{"input": 0.05, "output": 0.2}}, '
                               f"got {rates!r}")
        unknown = sorted(set(rates) - TIER_FIELDS)
        if unknown:
            raise EvalkitError(f"{where}: 'tiers.{tier}': unknown field(s) {', '.join(unknown)} "
                               f"(use {', '.join(sorted(TIER_FIELDS))})")
        rate = [_rate(where, rates, name, name != "cached_input", f"tiers.{tier}.{name}")
                for name in ("input", "cached_input", "output")]
        rows.append((tier, rate[0] or 0.0, rate[1], rate[2] or 0.0))
    return tuple(rows)
