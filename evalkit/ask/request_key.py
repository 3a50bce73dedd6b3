"""Cache keys: the sha256 of everything that affects a model's output and nothing else.

Provider, model, endpoint identity, generation parameters, and the messages with each image
replaced by the hash of its source bytes plus its transform (see docs/architecture.md). API keys,
concurrency, retries and timeouts cannot enter a key because request_key never receives them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, TextPart

SCHEMA_VERSION = 1



def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _memo(table: dict[str, dict[str, Any]], obj: Any, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A read-only dict per distinct value, keyed by repr (which tells 1, 1.0 and True apart, as
    JSON does): every query of a run shares its parameters and transforms, and dataclasses.asdict
    was most of a key's cost. The dicts only ever go to json.dumps."""
    same = _SEEN.get(id(obj))  # the same object as before (a benchmark's shared defaults): no repr
    if same is not None and same[0] is obj and same[1] is table:
        return same[2]
    tag = repr(obj)
    d = table.get(tag)
    if d is None:
        if len(table) >= 1024:
            table.clear()
        d = table[tag] = make()
    if len(_SEEN) >= 1024:
        _SEEN.clear()
    _SEEN[id(obj)] = (obj, table, d)  # holds obj, so its id is not reused while the entry lives
    return d


_PARAMS: dict[str, dict[str, Any]] = {}
_SEEN: dict[int, tuple[Any, dict[str, dict[str, Any]], dict[str, Any]]] = {}
_TRANSFORMS: dict[str, dict[str, Any]] = {}


def _params_dict(params: GenParams) -> dict[str, Any]:
    return _memo(_PARAMS, params, lambda: _params_dict_of(params))


def _params_dict_of(params: GenParams) -> dict[str, Any]:
    """params.to_dict() with numeric fields normalised, so temperature=0 and 0.0 share a key. A repeated
    query's sample index (--repeats) enters from 1 on only: repeat 0 keeps the key of 0.1.0's request."""
    d = params.to_dict()
    if params.repeat:
        d["repeat"] = int(params.repeat)
    for name in ("temperature", "top_p"):
        if d.get(name) is not None:
            d[name] = float(d[name])
    if d.get("max_tokens") is not None:
        d["max_tokens"] = int(d["max_tokens"])
    return d


def _message_dict(message: Message, source_hash: Callable[[ImageRef], str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"text": part.text})
        elif isinstance(part, ImagePart):
            t = part.transform
            parts.append({"image": source_hash(part.ref), "transform": _memo(_TRANSFORMS, t, lambda t=t: asdict(t))})
        else:  # pragma: no cover - Part is a closed union
            raise TypeError(f"unknown message part {type(part).__name__}")
    return {"role": message.role, "parts": parts}


def request_key(
    *,
    provider: str,
    model: str,
    endpoint: str,
    params: GenParams,
    messages: Sequence[Message],
    source_hash: Callable[[ImageRef], str],
) -> str:
    """sha256 hex of the canonical JSON of one request's output-affecting content.

    endpoint is the caller's identity string: the base URL, the sorted replica URLs joined,
    or a --cache-tag. source_hash maps an image to the hash of its bytes (not its path).
    """
    payload = {
        "schema": SCHEMA_VERSION,
        "provider": provider,
        "model": model,
        "endpoint": endpoint,
        "params": _params_dict(params),
        "messages": [_message_dict(m, source_hash) for m in messages],
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
