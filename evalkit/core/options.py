"""Typed option fields: what a run is told (core.settings.RunConfig) and each benchmark's protocol
switches (its Options) are declared with `option(...)`, checked by `build` and turned into flags by
`add_arguments`.

Every setting is a field of a frozen dataclass with its help text and its role, so the
command line, the Python API's validation and the run identity are all derived from one
place and cannot disagree:

- `role="identity"`: changes what is asked or how it is scored (enters the run identity
  when its value differs from the default);
- `role="generation"`: a generation or image-size setting (identity too, reported apart);
- `role="endpoint"`: who answers (enters the identity through the provider spec);
- `role="operational"`: how fast, where, how verbose (never identity).

Stdlib only: the CLI builds its parser from these classes before anything heavy is imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, field, fields
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.text.shown import shown_value

ROLES = ("identity", "generation", "endpoint", "operational")


def option(default: Any = None, *, help: str, role: str = "identity", flag: str | None = None,
           choices: Iterable[Any] | None = None, metavar: str | None = None, repeat: bool = False,
           at_least: float | None = None, above: float | None = None, at_most: float | None = None) -> Any:
    """A settings field. `flag` overrides the generated `--field-name` (e.g. "--no-cache");
    a bool whose flag starts with --no- stores False; `repeat` makes a flag repeatable (lists).
    `at_least` / `above` bound a number (inclusive / exclusive), `at_most` from above (inclusive); every
    float must be finite."""
    assert role in ROLES, role
    meta = {"help": help, "role": role, "flag": flag, "choices": tuple(choices) if choices else None,
            "metavar": metavar, "repeat": repeat, "at_least": at_least, "above": above,
            "at_most": at_most}
    return field(default=default, metadata=meta)


def flag_of(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


# ---- validation -----------------------------------------------------------------------------


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_type(name: str, value: Any, hint: Any) -> Any:
    """The value, coerced where it is lossless (int -> float, list -> tuple, JSON text -> dict);
    EvalkitError naming the option otherwise."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        hint, origin, args = inner[0], typing.get_origin(inner[0]), typing.get_args(inner[0])
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
        if hasattr(value, "__fspath__"):
            return str(value)
    elif origin is tuple:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif origin is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as e:
                raise EvalkitError(f"{_flag(name)} is not valid JSON: {e}") from e
            if not isinstance(value, dict):
                raise EvalkitError(f"{_flag(name)} must be a JSON object")
        if isinstance(value, Mapping):
            return dict(value)
    raise EvalkitError(f"option '{name}' must be {_describe(hint)}, not {type(value).__name__} ({shown_value(value)})")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        return "a string or a list of strings"
    if typing.get_origin(hint) is dict:
        return "a JSON object (dict)"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(hint, str(hint))


def _check_bounds(f: dataclasses.Field[Any], value: Any) -> None:
    """Finite numbers within the field's bounds: a NaN, 0 or negative here was a traceback, a silent
    whole-set run (--limit 0) or a dropped tail (--limit -3)."""
    if isinstance(value, dict):
        bad = _non_finite(value)
        if bad:
            raise EvalkitError(f"{flag_of(f)}: {bad} is not a finite number")
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if not math.isfinite(value):
        raise EvalkitError(f"{flag_of(f)} must be a finite number, not {value}")
    at_least, above = f.metadata.get("at_least"), f.metadata.get("above")
    if at_least is not None and value < at_least:
        raise EvalkitError(f"{flag_of(f)} must be at least {at_least:g}, not {value:g}")
    if above is not None and value <= above:
        raise EvalkitError(f"{flag_of(f)} must be more than {above:g}, not {value:g}")
    at_most = f.metadata.get("at_most")
    if at_most is not None and value > at_most:
        raise EvalkitError(f"{flag_of(f)} must be at most {at_most:,g}, not {value:,}")


def _non_finite(obj: Any, path: str = "") -> str | None:
    """The JSON path of the first NaN or infinity in a parsed JSON value (Python's json reads them)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "a value"
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        found = _non_finite(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of the settings dataclass `cls` from known, type-checked, bounded values."""
    hints = _hints(cls)
    checked = {}
    for f in fields(cls):
        if f.name not in values:
            continue
        value = _check_type(f.name, values[f.name], hints[f.name])
        choices = f.metadata.get("choices")
        if choices and value is not None and value not in choices:
            raise EvalkitError(f"option '{f.name}' must be one of {', '.join(map(str, choices))}, not {value!r}")
        _check_bounds(f, value)
        checked[f.name] = value
    return cls(**checked)


def unknown_option(name: str, valid: Iterable[str], owners: Mapping[str, str], bench: str) -> EvalkitError:
    """The error for a keyword no settings class of this run knows, naming the closest valid ones
    or the benchmark it belongs to."""
    if name in owners:
        return EvalkitError(f"option '{name}' ({_flag(name)}) belongs to benchmark {owners[name]}, not {bench}")
    close = difflib.get_close_matches(name, list(valid), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return EvalkitError(f"unknown option '{name}' for evalkit.run('{bench}', ...){hint}")


def non_default(obj: Any, roles: Iterable[str] | None = None) -> dict[str, Any]:
    """The fields whose value differs from the default (optionally of some roles only): an option
    left at its default never enters an identity, so adding an option never moves one."""
    out = {}
    for f in fields(obj):
        if roles is not None and f.metadata.get("role", "identity") not in roles:
            continue
        value = getattr(obj, f.name)
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)  # type: ignore[misc]
        if value != default:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


# ---- command line ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type,
                  skip: Iterable[str] = ()) -> None:
    """argparse flags for every field of a settings dataclass. Defaults are left to the dataclass
    (argparse's default is None = "not given"), so only what the user typed reaches `build`."""
    hints = _hints(cls)
    for f in fields(cls):
        if f.name in skip:
            continue
        meta = f.metadata
        flag = flag_of(f)
        hint = hints[f.name]
        kw: dict[str, Any] = {"dest": f.name, "help": meta["help"], "default": None}
        base = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        kind = base[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) else hint
        if kind is bool:
            kw["action"] = "store_false" if flag.startswith("--no-") and f.default is True else "store_true"
        elif meta.get("repeat"):
            kw["action"] = "append"
        elif typing.get_origin(kind) is dict:
            kw["type"] = str  # JSON text, checked by build()
        else:
            kw["type"] = kind if kind in (int, float) else str
        if meta.get("choices"):
            kw["choices"] = meta["choices"]
        if meta.get("metavar"):
            kw["metavar"] = meta["metavar"]
        parser.add_argument(flag, **kw)


def given(namespace: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The fields of `cls` the user gave on the command line."""
    return {f.name: getattr(namespace, f.name) for f in fields(cls)
            if getattr(namespace, f.name, None) is not None}


def field_names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]
