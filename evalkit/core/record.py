"""One line of records.jsonl as a value: `Record`, and `Parsed`, what answer extraction made of a response.

Apart from the values a run passes along (evalkit/core/types.py) because this is the run directory's line
format: its optional fields, and the checks a line read back must pass, are kept together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.core.types import is_cut_off
from evalkit.core.usage import reported_cost


@dataclass
class Parsed:
    """The outcome of answer extraction. answer None means unparsed (never a guess)."""

    answer: str | None
    method: str  # e.g. "rule", "first_char", "llm", "empty", "unparsed", "refusal"
    refusal: bool = False


@dataclass
class Record:
    """One line of records.jsonl: everything known about one query's outcome."""

    query_id: str
    item_id: str
    base_id: str
    variant: dict[str, Any]
    model: str
    request_key: str
    response: str | None
    gold: str
    parsed: str | None = None
    parse_method: str | None = None
    correct: bool | None = None
    refusal: bool = False
    error: str | None = None
    error_message: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)  # token counts (int), and cost_usd where reported
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    category: str = ""
    prompt: str = ""  # prompt text, for replay through the simulator
    image_fps: list[str] = field(default_factory=list)  # image fingerprints, for replay
    image_sizes: list[list[int]] = field(default_factory=list)  # [width, height] of each image as sent
    via: str | None = None  # "batch": answered by a provider batch (billed at the batch price); None: live
    served_by: str | None = None  # the model snapshot the reply named (provenance; None: not said)
    served_tier: str | None = None  # the service tier the reply said served it (priced at it); None: not said
    repeat: int = 0  # which sample of its query (--repeats); query_id is then "<query id>#r<repeat>"
    max_tokens: int | None = None  # the output budget a cut-off was asked again with (--reask-cutoffs)
    asked_with: str | None = None  # "evalkit-0.1": an answer 0.1.0 was asked for, kept (engine/resume.py)

    @property
    def cut_off(self) -> bool:
        """Cut off while thinking (see is_cut_off): counted apart, never shown to an extractor."""
        return self.error is None and is_cut_off(self.response, self.finish_reason)

    def to_dict(self) -> dict[str, Any]:
        """Shallow copy by hand: dataclasses.asdict deep-copies and was the cost of every append."""
        d = dict(self.__dict__)
        for optional in ("via", "served_by", "served_tier", "max_tokens", "asked_with"):  # unset: lines as they always were
            if d[optional] is None:
                del d[optional]
        if not d["repeat"]:
            del d["repeat"]
        d["variant"] = dict(self.variant)
        d["usage"] = dict(self.usage)
        d["image_fps"] = list(self.image_fps)
        d["image_sizes"] = [list(x) for x in self.image_sizes]
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Record:
        """A record read back from JSON; ValueError naming the field when a value has the wrong type or
        a required field is missing (a damaged line must not pass for a record and fail later)."""
        if not isinstance(d, dict):
            raise ValueError(f"a record is a JSON object, not {type(d).__name__}")
        for name, check in _RECORD_FIELDS.items():
            if name not in d:
                if name in _RECORD_REQUIRED:
                    raise ValueError(f"{name} is missing")
            elif not check(d[name]):
                raise ValueError(f"{name} has the wrong type ({type(d[name]).__name__})")
        known = {k: d[k] for k in _RECORD_FIELDS if k in d}
        return Record(**known)


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_RECORD_REQUIRED = ("query_id", "item_id", "base_id", "variant", "model", "request_key", "response", "gold")
# what each field of a records.jsonl line may hold
_RECORD_FIELDS: dict[str, Any] = {
    "query_id": _str, "item_id": _str, "base_id": _str, "model": _str, "request_key": _str, "gold": _str,
    "variant": lambda v: isinstance(v, dict),
    "response": _opt_str, "parsed": _opt_str, "parse_method": _opt_str, "error": _opt_str,
    "error_message": _opt_str, "finish_reason": _opt_str,
    "correct": lambda v: v is None or isinstance(v, bool),
    "refusal": lambda v: isinstance(v, bool), "cached": lambda v: isinstance(v, bool),
    "usage": lambda v: isinstance(v, dict) and all(isinstance(k, str) and (_int(x) or (
        k == "cost_usd" and reported_cost(x) is not None)) for k, x in v.items()),
    "latency_s": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "category": _str, "prompt": _str, "via": _opt_str, "served_by": _opt_str, "served_tier": _opt_str,
    "asked_with": _opt_str,
    "repeat": lambda v: _int(v) and v >= 0,
    "max_tokens": lambda v: v is None or (_int(v) and v > 0),
    "image_fps": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "image_sizes": lambda v: isinstance(v, list) and all(isinstance(x, list) and all(_int(n) for n in x) for x in v),
}
