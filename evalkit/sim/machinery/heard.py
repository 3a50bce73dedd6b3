"""What the simulated server heard: one record per API request, for tests that check the wire
(which route, which query, which kinds of credential, which attribution headers) rather than
only the answers. Credential values are never kept: only the names of the forms that were sent.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from aiohttp import web

from evalkit.sim.answer_forms import FORM_WORDS, answer_form
from evalkit.sim.machinery.image_cost import image_details, media_resolution

HEARD_MAX = 10_000
# attribution headers, as OpenRouter reads them (openrouter.ai/docs/app-attribution, read 2026-11-26)
ATTRIBUTION = ("HTTP-Referer", "X-Title", "X-OpenRouter-Title")
_SECRET_PARAMS = frozenset({"key", "api-key", "api_key", "access_token", "sig"})
_WITHHELD = "<withheld>"
_PROVIDER_ROUTE = "/api/v1/chat/completions"  # OpenRouter's: its body may carry routing preferences
_OWN_PATHS = ("/sim/", "/health")
_RESOLUTION_WORDS = (b'"detail"', b"ediaResolution", b"edia_resolution")  # a cheap look before parsing a body


@dataclass(frozen=True)
class Heard:
    """One API request as it arrived."""

    method: str
    route: str  # the route pattern that matched (`/openai/deployments/{deployment}/chat/completions`), else the path
    path: str
    query: dict[str, str]  # credential parameters (`?key=`) with their values withheld
    auth: tuple[str, ...]  # the credential forms present: api-key, bearer, sigv4, authorization, x-api-key, x-goog-api-key,
    #                       x-amz-security-token, key-query
    headers: dict[str, str]  # the attribution headers present (ATTRIBUTION), nothing else
    provider: Any = None  # OpenRouter's `provider` body field (routing preferences), as sent
    image_detail: tuple[str | None, ...] = ()  # each chat-completions `image_url` part's `detail` (None: not sent)
    media_resolution: str | None = None  # a generateContent body's generationConfig.mediaResolution, as sent
    answer_form: dict[str, Any] | None = None  # the fields asking for a structured answer, as sent (answer_forms)


def auth_forms(request: web.Request) -> tuple[str, ...]:
    """Which credential forms a request carries, by name only."""
    forms = []
    if request.headers.get("api-key"):
        forms.append("api-key")
    authorization = request.headers.get("Authorization", "")
    if authorization:
        forms.append("bearer" if authorization[:7].lower() == "bearer " else
                     "sigv4" if authorization.startswith("AWS4-HMAC-SHA256 ") else "authorization")
    forms += [name for name in ("x-api-key", "x-goog-api-key", "x-amz-security-token") if request.headers.get(name)]
    if "key" in request.query:
        forms.append("key-query")
    return tuple(forms)


@dataclass
class HeardLog:
    """The last HEARD_MAX requests, oldest first."""

    limit: int = HEARD_MAX
    _items: deque[Heard] = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._items = deque(maxlen=self.limit)

    def add(self, heard: Heard) -> None:
        with self._lock:
            self._items.append(heard)

    def snapshot(self) -> tuple[Heard, ...]:
        with self._lock:
            return tuple(self._items)

    def reset(self) -> None:
        with self._lock:
            self._items.clear()


async def _body_fields(request: web.Request) -> dict[str, Any]:
    """What the log keeps of a body (the body stays readable by the handler): OpenRouter's `provider` on its
    chat route, and the image resolution a model request asks for. A body naming neither is not parsed."""
    routed = request.path.endswith(_PROVIDER_ROUTE)
    if request.method != "POST" or not (routed or request.content_type == "application/json"):
        return {}  # a multipart upload (a batch file) is left unread: its handler reads it as a stream
    raw = await request.read()
    if not routed and not any(word in raw for word in (*_RESOLUTION_WORDS, *FORM_WORDS)):
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(body, dict):
        return {}
    return {"provider": body.get("provider") if routed else None, "image_detail": image_details(body),
            "media_resolution": media_resolution(body), "answer_form": answer_form(body)}


def listen(log: HeardLog) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Middleware recording every API request in `log` (the simulator's own /sim and /health are not)."""

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if not request.path.startswith(_OWN_PATHS):
            info = request.match_info.route.resource
            log.add(Heard(
                method=request.method,
                route=info.canonical if info is not None else request.path,
                path=request.path,
                query={k: _WITHHELD if k.lower() in _SECRET_PARAMS else v for k, v in request.query.items()},
                auth=auth_forms(request),
                headers={name: request.headers[name] for name in ATTRIBUTION if name in request.headers},
                **await _body_fields(request),
            ))
        return await handler(request)

    return record


def heard_route(log: HeardLog) -> Callable[[web.Request], Awaitable[web.Response]]:
    """`GET /sim/heard`: the log as JSON, for a server in another process."""

    async def handle(request: web.Request) -> web.Response:
        return web.json_response([asdict(h) for h in log.snapshot()])

    return handle
