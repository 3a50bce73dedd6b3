"""The core values that flow through a run: Item -> Query -> Response -> Record.

All are plain frozen dataclasses so they can be hashed, compared in tests and
turned into JSON without surprises.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from evalkit.core.usage import RateInfo, Usage, reported_cost  # noqa: F401 - part of this module's names

# Error kinds a provider may report; "empty" is empty content (retried like transient);
# "refused" is the provider declining on content grounds (permanent, counted on its own);
# "exhausted" is the account unable to pay (out of credits or quota): the run stops sending.
ErrorKind = Literal["rate_limit", "transient", "permanent", "refused", "timeout", "empty", "exhausted", "data"]
DATA_ERROR = "data"  # a record's error when its item's data failed (an unreadable image): not the model's

# How each API says "the output token limit was reached" (OpenAI and vLLM, Anthropic, Gemini).
TOKEN_LIMIT_FINISHES = frozenset({"length", "max_tokens", "MAX_TOKENS"})


def is_cut_off(text: str | None, finish_reason: str | None) -> bool:
    """Cut off while thinking: the token limit ended the reply before any final answer. Its text
    is empty (the thinking came apart, or was hidden) or only an unclosed `<think>` block. The
    same request cannot end differently, so it is an outcome of its own, not an error to retry."""
    if finish_reason not in TOKEN_LIMIT_FINISHES:
        return False
    body = (text or "").strip()
    lower = body.lower()
    end = lower.rfind("</think>")
    if end >= 0:
        return not body[end + len("</think>"):].strip()
    return not body or lower.startswith("<think>")


@dataclass(frozen=True)
class ImageRef:
    """Where an image's bytes come from: a file path, raw bytes, base64 text (TSV cells), or a span
    of base64 text inside a data file (big JSON/TSV sets read without holding their images).

    A "span" value is PATH, START and END joined by NUL characters: the base64 text (JSON string
    escapes allowed) is bytes START..END of the file at PATH as given (a link is opened as a link,
    never resolved), read and decoded only when the image is needed (evalkit.core.inline).

    The cache identity of an image is the sha256 of its source bytes (see images.source_hash),
    never the path, so moving a dataset does not invalidate the cache, and a span and a b64 ref of
    the same picture are the same image.
    """

    kind: Literal["path", "bytes", "b64", "span"]
    value: str | bytes

    @staticmethod
    def from_path(path: str) -> ImageRef:
        return ImageRef("path", str(path))

    @staticmethod
    def from_bytes(data: bytes) -> ImageRef:
        return ImageRef("bytes", data)

    @staticmethod
    def from_b64(text: str) -> ImageRef:
        return ImageRef("b64", text)

    @staticmethod
    def from_span(path: str, start: int, end: int) -> ImageRef:
        """Base64 text at bytes start..end (end exclusive) of the file `path`."""
        if not 0 <= start <= end:
            raise ValueError(f"bad span {start}..{end}")
        return ImageRef("span", f"{path}\0{int(start)}\0{int(end)}")

    def span(self) -> tuple[str, int, int]:
        """(path, start, end) of a "span" ref."""
        if self.kind != "span":
            raise ValueError(f"not a span: a {self.kind} image")
        path, start, end = str(self.value).rsplit("\0", 2)
        return path, int(start), int(end)

    def describe(self) -> str:
        """Short human label for error messages (never dumps the bytes)."""
        if self.kind == "path":
            return str(self.value)
        if self.kind == "span":
            path, start, end = self.span()
            return f"<base64 image at bytes {start}-{end} of {path}>"
        return f"<{self.kind} image, {len(self.value)} chars>"


@dataclass(frozen=True)
class Transform:
    """What is done to an image before sending. Part of the cache key.

    rotate: degrees counter-clockwise (PIL convention), one of 0/90/180/270.
    crop: (left, top, right, bottom) in pixels of the oriented, rotated image.
    max_side / max_pixels: downscale (never upscale) to fit, keeping aspect ratio.
    fmt: output format ("JPEG" or "PNG"); None keeps the source bytes untouched when no
    other change is asked for, and re-encodes as JPEG (or PNG when there is alpha) otherwise.
    size: exact output size (w, h) after everything else (benchmarks that standardise, e.g. 512x512).
    """

    rotate: int = 0
    crop: tuple[int, int, int, int] | None = None
    max_side: int | None = None
    max_pixels: int | None = None
    size: tuple[int, int] | None = None
    fmt: str | None = None
    quality: int = 90

    def is_identity(self) -> bool:
        return self == Transform(fmt=self.fmt, quality=self.quality) and self.fmt is None


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    ref: ImageRef
    transform: Transform = Transform()


Part = TextPart | ImagePart


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    parts: tuple[Part, ...]

    @staticmethod
    def user(*parts: Part | str) -> Message:
        return Message("user", tuple(TextPart(p) if isinstance(p, str) else p for p in parts))

    @staticmethod
    def system(text: str) -> Message:
        return Message("system", (TextPart(text),))

    def text(self) -> str:
        """All text parts joined by newlines (what the simulator and replay match on)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    def images(self) -> tuple[ImagePart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ImagePart))


@dataclass(frozen=True)
class GenParams:
    """Every output-affecting generation parameter (all part of the cache key).

    extra: provider/server-specific fields passed through verbatim in the request body,
    e.g. {"chat_template_kwargs": {"enable_thinking": False}} or {"guided_choice": ["A","B"]}.
    repeat: which sample of a repeated query this is (--repeats). Never sent to a provider and left
    out of to_dict(); the cache key holds it from 1 on, so repeat 0 keeps 0.1.0's key.
    reasoning_effort / thinking_budget: the provider-neutral reasoning switch (providers/reasoning.py);
    in to_dict() only when set, so requests without it keep their cache keys.
    detail / media_resolution: the image resolution setting (`--detail`, `--media-resolution`; issue 45,
    item 2): it changes answers, so it is in the key when set, and absent otherwise, as the switch above.
    api: "responses" when the request goes to OpenAI's Responses API (`--api`, or a model that exists only
    there; issue 47): it is part of what is sent, so it is in to_dict() and the key; None (Chat Completions)
    is absent from both, so every chat request keeps its key.
    service_tier: the service tier this request asks for (--service-tier; providers/tiers.py), set by the
    runner as it sends; a delivery setting like --batch (same model, same answers), so never in to_dict(),
    the cache key or the run identity.
    answer_schema: the JSON schema of the answer (`--structured`; issue 47, item 3), as canonical JSON text so
    the value stays hashable; each provider sends it its own way (providers/structured.py). It changes what
    is asked, so it is in the key when set, and absent otherwise, as the switch above.
    """

    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    top_p: float | None = None
    extra: tuple[tuple[str, Any], ...] = ()  # sorted (key, value) pairs, hashable
    repeat: int = 0
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    detail: str | None = None
    media_resolution: str | None = None
    service_tier: str | None = None
    api: str | None = None
    answer_schema: str | None = None

    @staticmethod
    def with_extra(extra: dict[str, Any] | None = None, **kw: Any) -> GenParams:
        return GenParams(extra=tuple(sorted((extra or {}).items())), **kw)

    def extra_dict(self) -> dict[str, Any]:
        return dict(self.extra)

    def schema(self) -> dict[str, Any] | None:
        """The answer's JSON schema as a dict (a fresh one each call), or None without `--structured`."""
        import json

        return json.loads(self.answer_schema) if self.answer_schema is not None else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["repeat"]  # not a request parameter (see the class docstring)
        del d["service_tier"]  # a delivery setting, never in the key (see the class docstring)
        for name in ("reasoning_effort", "thinking_budget", "detail", "media_resolution", "api", "answer_schema"):
            if d[name] is None:
                del d[name]  # absent unless set: the cache keys and generation_sent of earlier runs stand
        if self.answer_schema is not None:
            d["answer_schema"] = self.schema()
        d["extra"] = self.extra_dict()
        d["stop"] = list(self.stop) if self.stop else None
        return d


@dataclass(frozen=True)
class Item:
    """One benchmark question as loaded from the official files."""

    id: str
    question: str
    options: dict[str, str]  # letter -> text, in display order (empty for open questions)
    answer: str  # gold letter (or "Yes"/"No")
    images: tuple[ImageRef, ...] = ()
    category: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Query:
    """One request to a model: an item under one variant, with the gold answer moved to match.

    id is stable across runs (item id + variant), which is what resume keys on.
    base_id groups all variants of one base question (shifts, rotations, languages) for the
    simulated model's answer key and for consistency metrics.
    """

    id: str
    item_id: str
    base_id: str
    variant: dict[str, Any]
    messages: tuple[Message, ...]
    gold: str
    options: dict[str, str] = field(default_factory=dict)  # as shown in this variant
    params: GenParams = GenParams()
    category: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def prompt_text(self) -> str:
        """The text of the last user message: what the answer key and replay match on."""
        users = [m for m in self.messages if m.role == "user"]
        return users[-1].text() if users else ""

    def image_parts(self) -> tuple[ImagePart, ...]:
        """The images of every message, in order; worked out once per query (the runner, the cache
        lookup and the schedule each ask for them; the messages are frozen)."""
        parts = self.__dict__.get("_image_parts")
        if parts is None:
            parts = tuple(p for m in self.messages for p in m.images())
            object.__setattr__(self, "_image_parts", parts)
        return parts


@dataclass
class Response:
    """What came back for one request. error is None on success, else an ErrorKind."""

    text: str = ""
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    latency_s: float = 0.0
    error: ErrorKind | None = None
    error_message: str | None = None
    reasoning: str | None = None
    via: str | None = None  # "batch" when a provider batch answered it (None: a live call)
    served_by: str | None = None  # the snapshot that answered, as the reply names it (model · fingerprint)
    served_tier: str | None = None  # the service tier the reply says served it, evalkit's name (providers/tiers.py)
    limits: RateInfo | None = field(default=None, repr=False)  # the rate limits the reply announced (not cached)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_cache(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "usage": self.usage.to_dict(),
            "finish_reason": self.finish_reason,
            "latency_s": self.latency_s,
            "reasoning": self.reasoning,
            **({"via": self.via} if self.via else {}),
            **({"served_by": self.served_by} if self.served_by else {}),
            **({"served_tier": self.served_tier} if self.served_tier else {}),
        }

    @staticmethod
    def from_cache(d: dict[str, Any]) -> Response:
        return Response(
            text=d.get("text") or "",
            usage=Usage.from_dict(d.get("usage")),
            finish_reason=d.get("finish_reason"),
            latency_s=float(d.get("latency_s") or 0.0),
            reasoning=d.get("reasoning"),
            via=d.get("via"),
            served_by=d.get("served_by") if isinstance(d.get("served_by"), str) else None,
            served_tier=d.get("served_tier") if isinstance(d.get("served_tier"), str) else None,
        )


@dataclass
class Outcome:
    """The result of asking one query (success, empty answer, or an error left after retries)."""

    query: Query
    response: Response
    request_key: str
    cached: bool
    image_fps: list[str] = field(default_factory=list)
    image_sizes: list[list[int]] = field(default_factory=list)  # as sent (after provider limits)
