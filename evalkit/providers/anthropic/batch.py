"""`anthropic/` batches: the Message Batches API (docs.anthropic.com/en/docs/build-with-claude/
batch-processing and /en/api/creating-message-batches, read 2026-11-25), through the official SDK.

Each request's `params` are exactly the live call's arguments. Message batches carry no metadata (the
create request takes only `requests`, and a batch shows its lines only in its results), so a batch
created just before a kill is recognised only by its results: one created since the intent, with as many
requests, whose results hold exactly the intent's custom ids. While such a candidate is in progress,
find() cannot tell (BatchUndecided): another run of the same account may have made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import ProviderError
from evalkit.core.sdk import import_sdk
from evalkit.core.types import Response
from evalkit.providers.anthropic.client import response_from_anthropic
from evalkit.providers.batch_api import BatchGone, BatchLine, BatchStatus, BatchUndecided
from evalkit.providers.registry import batch_limits
from evalkit.providers.wire.sdk_errors import sdk_error
from evalkit.providers.wire.sdk_http import EDIT_MAX_BYTES, guarded_sdk_client

if TYPE_CHECKING:
    from evalkit.core.types import GenParams, Message
    from evalkit.images.pipeline import PreparedImage
    from evalkit.providers.anthropic.client import AnthropicProvider

_STATE = {"in_progress": "running", "canceling": "running", "ended": "ended"}
# error types worth another try (docs.anthropic.com/en/api/errors); the rest are the request's own fault
_TRANSIENT = {"api_error", "overloaded_error", "rate_limit_error", "timeout_error", "gateway_timeout_error"}
LIST_PAGES = 5


def anthropic_line_result(d: Any) -> tuple[str, Response] | None:
    """One results line ({custom_id, result: {type, message | error}}) as (custom id, answer or error)."""
    if not isinstance(d, dict) or not isinstance(d.get("custom_id"), str) or not isinstance(d.get("result"), dict):
        return None
    cid, result = d["custom_id"], d["result"]
    kind = result.get("type")
    if kind == "succeeded":
        try:
            return cid, response_from_anthropic(result.get("message"))
        except ProviderError as e:
            return cid, Response(error=e.kind, error_message=e.message)
    if kind == "errored":
        inner = (result.get("error") or {}).get("error") if isinstance(result.get("error"), dict) else None
        etype = inner.get("type") if isinstance(inner, dict) else None
        message = inner.get("message") if isinstance(inner, dict) else None
        return cid, Response(error="transient" if etype in _TRANSIENT else "permanent",
                             error_message=f"{etype or 'error'} in batch" + (f": {message}" if message else ""))
    return cid, Response(error="transient", error_message=f"{kind or 'no result'} in batch")  # canceled, expired


def _epoch(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else 0.0


class AnthropicBatches:
    provider = "anthropic"
    limits = batch_limits("anthropic")

    def __init__(self, live: AnthropicProvider, *, api_key: str, timeout_s: float = 300.0) -> None:
        anthropic = import_sdk("anthropic", f"--batch with {live.spec.label}")  # lazy: only for --batch

        self._anthropic = anthropic
        self._live = live
        kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 2, "timeout": timeout_s,
                                  "http_client": guarded_sdk_client(anthropic, timeout_s, EDIT_MAX_BYTES)}
        if live.spec.base_urls:
            kwargs["base_url"] = live.spec.base_urls[0]
        self._client = anthropic.AsyncAnthropic(**kwargs)
        self._ids: dict[str, frozenset[str]] = {}  # ended batch id -> the custom ids of its results

    def line(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> BatchLine:
        return BatchLine.of(self._live.body(messages, params, images))

    async def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return await fn(*args, **kw)
        except self._anthropic.NotFoundError as e:
            raise BatchGone(str(args[0]) if args else "") from e
        except Exception as e:  # noqa: BLE001 - classified like a live call's
            error = sdk_error(self._anthropic, e)
            if error is None:
                raise
            raise error from e

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        requests = [{"custom_id": x.custom_id, "params": x.body} for x in lines]
        batch = await self._call(self._client.messages.batches.create, requests=requests)
        return batch.id

    def _status(self, b: Any, tag: str | None = None) -> BatchStatus:
        c = b.request_counts
        failed = c.errored + c.canceled + c.expired
        state = _STATE.get(b.processing_status, "running")
        if state == "ended" and not (c.succeeded or c.errored or c.processing):  # nothing answered at all
            state = "cancelled" if c.canceled else "expired" if c.expired else state
        return BatchStatus(b.id, state,  # type: ignore[arg-type]
                           total=c.processing + c.succeeded + failed, done=c.succeeded, failed=failed,
                           provider_state=b.processing_status, tag=tag)

    async def status(self, batch_id: str) -> BatchStatus:
        return self._status(await self._call(self._client.messages.batches.retrieve, batch_id))

    async def results(self, batch_id: str) -> dict[str, Response]:
        out: dict[str, Response] = {}
        decoder = await self._call(self._client.messages.batches.results, batch_id)
        try:
            async for item in decoder:
                parsed = anthropic_line_result(item.model_dump(mode="json"))
                if parsed is not None:
                    out[parsed[0]] = parsed[1]
        except Exception as e:  # noqa: BLE001 - a cut-off stream: read again later
            raise sdk_error(self._anthropic, e) or ProviderError("transient", f"results unreadable: {e}") from e
        return out

    async def find(self, tag: str, custom_ids: Sequence[str], since: float) -> list[BatchStatus]:
        """The ended batch, created since the intent, whose results hold exactly `custom_ids`; BatchUndecided
        while none does and a batch with as many requests is still in progress (it may be the one)."""
        want = frozenset(custom_ids)
        waiting: list[str] = []
        page = await self._call(self._client.messages.batches.list, limit=100)
        for _ in range(LIST_PAGES):
            for b in page.data:
                if _epoch(b.created_at) < since - 60:  # newest first: the rest are older still
                    return self._none(waiting)
                status = self._status(b, tag)
                if status.total != len(want):
                    continue
                if b.processing_status != "ended":
                    waiting.append(b.id)
                elif await self._ids_of(b.id) == want:
                    return [status]
            if not page.has_next_page():
                break
            page = await self._call(page.get_next_page)
        return self._none(waiting)

    @staticmethod
    def _none(waiting: list[str]) -> list[BatchStatus]:
        if waiting:
            raise BatchUndecided(waiting)
        return []

    async def _ids_of(self, batch_id: str) -> frozenset[str]:
        """The custom ids in an ended batch's results (read once: an ended batch does not change)."""
        if batch_id not in self._ids:
            decoder = await self._call(self._client.messages.batches.results, batch_id)
            try:
                self._ids[batch_id] = frozenset([item.custom_id async for item in decoder])
            except Exception as e:  # noqa: BLE001 - a cut-off stream: read again later
                raise sdk_error(self._anthropic, e) or ProviderError("transient", f"results unreadable: {e}") from e
        return self._ids[batch_id]

    async def cancel(self, batch_id: str) -> None:
        await self._call(self._client.messages.batches.cancel, batch_id)

    async def close(self) -> None:
        await self._client.close()
