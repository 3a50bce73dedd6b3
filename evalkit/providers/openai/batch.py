"""`openai/` batches: the Batch API with the Files API (platform.openai.com/docs/guides/batch and
/docs/api-reference/batch, read 2026-11-25), through the official SDK (imported when used).

A batch is one uploaded JSONL file of `{custom_id, method, url, body}` lines for
`/v1/chat/completions`, or `/v1/responses` for a run on the Responses API (issue 47) — each body exactly
what the live call sends — tagged in `metadata`
(`evalkit_tag`) so a batch created just before a kill is found again by listing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import ProviderError, classify_status
from evalkit.core.sdk import import_sdk
from evalkit.core.types import Response
from evalkit.providers.api_route import route_hint
from evalkit.providers.batch_api import BatchGone, BatchLine, BatchStatus
from evalkit.providers.openai.format import response_from_openai
from evalkit.providers.openai.responses import is_responses_body, response_from_responses
from evalkit.providers.registry import batch_limits
from evalkit.providers.wire.sdk_errors import sdk_error
from evalkit.providers.wire.sdk_http import EDIT_MAX_BYTES, guarded_sdk_client

if TYPE_CHECKING:
    from evalkit.core.types import GenParams, Message
    from evalkit.images.pipeline import PreparedImage
    from evalkit.providers.openai.compat import OpenAICompatProvider

ENDPOINT = "/v1/chat/completions"
TAG_KEY = "evalkit_tag"
_STATE = {"validating": "running", "in_progress": "running", "finalizing": "running", "cancelling": "running",
          "completed": "ended", "failed": "failed", "expired": "expired", "cancelled": "cancelled"}
LIST_PAGES = 10  # batches are listed newest first, 100 a page: a tag is looked for among the last 1,000


def openai_line_result(d: Any) -> tuple[str, Response] | None:
    """One line of an output or error file as (custom id, answer or classified error)."""
    if not isinstance(d, dict) or not isinstance(d.get("custom_id"), str):
        return None
    resp, err = d.get("response"), d.get("error")
    status = resp.get("status_code") if isinstance(resp, dict) else None
    if isinstance(resp, dict) and status == 200:
        try:
            body = resp.get("body")
            reply = response_from_responses(body) if isinstance(body, dict) and body.get("object") == "response" \
                else response_from_openai(body)
            return d["custom_id"], reply
        except ProviderError as e:
            return d["custom_id"], Response(error=e.kind, error_message=e.message)
    if isinstance(status, int):
        body = resp.get("body") if isinstance(resp, dict) else None
        words = body.get("error", {}).get("message", "") if isinstance(body, dict) and isinstance(
            body.get("error"), dict) else ""
        return d["custom_id"], Response(error=classify_status(status),
                                        error_message=route_hint(f"HTTP {status} in batch" + (f": {words}" if words else "")))
    code = err.get("code") if isinstance(err, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    kind = "transient" if code in (None, "batch_expired", "batch_cancelled", "server_error") else "permanent"
    return d["custom_id"], Response(error=kind, error_message=f"{code or 'error'} in batch: {message or ''}".strip())


class OpenAIBatches:
    provider = "openai"
    limits = batch_limits("openai")
    line_url = ENDPOINT  # each line's `url`, and the batch's `endpoint`

    def __init__(self, live: OpenAICompatProvider, *, api_key: str, timeout_s: float = 300.0) -> None:
        self._openai = import_sdk("openai", f"--batch with {live.spec.label}")  # lazy: only for --batch
        self._live = live
        self._client = self._make_client(live, api_key, timeout_s)

    def _make_client(self, live: OpenAICompatProvider, api_key: str, timeout_s: float) -> Any:
        return self._openai.AsyncOpenAI(api_key=api_key, base_url=live.pool.replicas[0].url, max_retries=2,
                                        timeout=timeout_s,
                                        http_client=guarded_sdk_client(self._openai, timeout_s, EDIT_MAX_BYTES))

    def line(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> BatchLine:
        return BatchLine.of(self._live.body(messages, params, images))

    async def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return await fn(*args, **kw)
        except Exception as e:  # noqa: BLE001 - classified like a live call's
            error = sdk_error(self._openai, e)
            if error is None:
                raise
            raise error from e

    def url_for(self, lines: Sequence[BatchLine]) -> str:
        """The lines' URL (and the batch's endpoint): Chat Completions', or the Responses API's for a run on it
        (one run's lines all take one route)."""
        responses = bool(lines) and is_responses_body(lines[0].body)
        return self.line_url.replace("/chat/completions", "/responses") if responses else self.line_url

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        url = self.url_for(lines)
        data = b"".join(json.dumps({"custom_id": x.custom_id, "method": "POST", "url": url,
                                    "body": x.body}, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                        for x in lines)
        uploaded = await self._call(self._client.files.create, file=(f"{tag}.jsonl", data), purpose="batch")
        batch = await self._call(self._client.batches.create, input_file_id=uploaded.id, endpoint=url,
                                 completion_window="24h", metadata={TAG_KEY: tag})
        return batch.id

    def _status(self, b: Any) -> BatchStatus:
        counts = b.request_counts
        return BatchStatus(b.id, _STATE.get(b.status, "running"),  # type: ignore[arg-type]
                           total=counts.total if counts else 0, done=counts.completed if counts else 0,
                           failed=counts.failed if counts else 0, provider_state=b.status,
                           tag=(b.metadata or {}).get(TAG_KEY))

    async def status(self, batch_id: str) -> BatchStatus:
        try:
            return self._status(await self._client.batches.retrieve(batch_id))
        except self._openai.NotFoundError as e:
            raise BatchGone(batch_id) from e
        except Exception as e:  # noqa: BLE001
            raise sdk_error(self._openai, e) or e from e

    async def results(self, batch_id: str) -> dict[str, Response]:
        b = await self._call(self._client.batches.retrieve, batch_id)
        out: dict[str, Response] = {}
        for file_id in (b.output_file_id, b.error_file_id):
            if not file_id:
                continue
            content = await self._call(self._client.files.content, file_id)
            for raw in content.content.splitlines():
                try:
                    parsed = openai_line_result(json.loads(raw))
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if parsed is not None:
                    out[parsed[0]] = parsed[1]
        return out

    async def find(self, tag: str, custom_ids: Sequence[str], since: float) -> list[BatchStatus]:
        found: list[BatchStatus] = []
        page = await self._call(self._client.batches.list, limit=100)
        for _ in range(LIST_PAGES):
            found += [self._status(b) for b in page.data if (b.metadata or {}).get(TAG_KEY) == tag]
            if found or not page.has_next_page() or (page.data and page.data[-1].created_at < since - 3600):
                break
            page = await self._call(page.get_next_page)
        return found

    async def cancel(self, batch_id: str) -> None:
        await self._call(self._client.batches.cancel, batch_id)

    async def close(self) -> None:
        await self._client.close()
