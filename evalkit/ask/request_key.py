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
from typing import Any, TypeVar

from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, TextPart

SCHEMA_VERSION = 1
T = TypeVar("T")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _memo(table: dict[str, T], obj: Any, make: Callable[[], T]) -> T:
    """A read-only value (a dict, its JSON text) per distinct object, keyed by repr (which tells 1, 1.0
    and True apart, as JSON does): every query of a run shares its parameters and transforms, and
    dataclasses.asdict was most of a key's cost. The values are only ever encoded or joined."""
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
_SEEN: dict[int, tuple[Any, dict[str, Any], Any]] = {}
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


def request_payload(*, provider: str, model: str, endpoint: str, params: GenParams, messages: Sequence[Message],
                    source_hash: Callable[[ImageRef], str]) -> dict[str, Any]:
    """What a request key hashes, as a dict (its canonical JSON is the key's text)."""
    return {
        "schema": SCHEMA_VERSION,
        "provider": provider,
        "model": model,
        "endpoint": endpoint,
        "params": _params_dict(params),
        "messages": [_message_dict(m, source_hash) for m in messages],
    }


_string = json.encoder.encode_basestring  # type: ignore[attr-defined]  # json.dumps(s, ensure_ascii=False)


_PARAMS_TEXT: dict[str, str] = {}  # canonical_json of each distinct parameters' and transform's dict
_TRANSFORMS_TEXT: dict[str, str] = {}


def _key_text(provider: str, model: str, endpoint: str, params: GenParams, messages: Sequence[Message],
              source_hash: Callable[[ImageRef], str]) -> str:
    """canonical_json(request_payload(...)), written out piece by piece: the same text (a test compares
    them over many requests), a fifth of the time. json.dumps sorted every dict of every request; here
    the sorted order is spelled once and the shared parts (parameters, transforms) are encoded once."""
    pieces = ['{"endpoint":', _string(endpoint), ',"messages":[']
    for i, message in enumerate(messages):
        pieces.append(',{"parts":[' if i else '{"parts":[')
        for j, part in enumerate(message.parts):
            if j:
                pieces.append(",")
            if type(part) is TextPart and type(part.text) is str:
                pieces += ('{"text":', _string(part.text), "}")
            elif type(part) is ImagePart:
                t = part.transform
                transform = _memo(_TRANSFORMS_TEXT, t, lambda t=t: canonical_json(asdict(t)))
                pieces += ('{"image":', _string(source_hash(part.ref)), ',"transform":', transform, "}")
            else:  # anything unusual is encoded as json.dumps would
                pieces.append(canonical_json(_message_dict(Message(message.role, (part,)), source_hash)["parts"][0]))
        pieces += ('],"role":', _string(message.role), "}")
    params_text = _memo(_PARAMS_TEXT, params, lambda: canonical_json(_params_dict(params)))
    pieces += ('],"model":', _string(model), ',"params":', params_text, ',"provider":', _string(provider),
               f',"schema":{SCHEMA_VERSION}}}')
    return "".join(pieces)


def request_key(
    *,
    provider: str,
    model: str,
    endpoint: str,
    params: GenParams,
    messages: Sequence[Message],
    source_hash: Callable[[ImageRef], str],
) -> str:
    """sha256 hex of the canonical JSON of one request's output-affecting content (request_payload).

    endpoint is the caller's identity string: the base URL, the sorted replica URLs joined,
    or a --cache-tag. source_hash maps an image to the hash of its bytes (not its path).
    """
    if not all(type(x) is str for x in (provider, model, endpoint)) or \
            not all(type(m.role) is str for m in messages):  # as json.dumps would encode them
        text = canonical_json(request_payload(provider=provider, model=model, endpoint=endpoint, params=params,
                                              messages=messages, source_hash=source_hash))
    else:
        text = _key_text(provider, model, endpoint, params, messages, source_hash)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
