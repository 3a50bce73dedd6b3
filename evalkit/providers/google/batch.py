"""`google/` batches: Gemini batch mode with inline requests (ai.google.dev/gemini-api/docs/batch-mode,
read 2026-11-25), through google-genai's `client.aio.batches`.

Each inline request holds the live call's contents and GenerateContentConfig, and its custom id in
`metadata` (returned with its response); the batch's display name is evalkit's tag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import ProviderError, classify_status
from evalkit.core.sdk import import_sdk
from evalkit.core.types import Response
from evalkit.providers.batch_api import BatchGone, BatchLine, BatchStatus
from evalkit.providers.google.client import gemini_contents, generation_settings
from evalkit.providers.google.reply import response_from_gemini
from evalkit.providers.registry import batch_limits

if TYPE_CHECKING:
    from evalkit.core.types import GenParams, Message
    from evalkit.images.pipeline import PreparedImage
    from evalkit.providers.google.client import GoogleProvider

_ENDED = {"JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"}
_OTHER_END = {"JOB_STATE_FAILED": "failed", "JOB_STATE_CANCELLED": "cancelled", "JOB_STATE_EXPIRED": "expired"}
LIST_PAGES = 10


def state_of(job_state: Any) -> str:
    name = str(getattr(job_state, "value", job_state) or "")
    return "ended" if name in _ENDED else _OTHER_END.get(name, "running")


def inline_result(d: Any) -> tuple[str, Response] | None:
    """One inlined response ({metadata: {custom_id}, response | error}) as (custom id, answer or error)."""
    meta = d.get("metadata") if isinstance(d, dict) else None
    cid = meta.get("custom_id") if isinstance(meta, dict) else None
    if not isinstance(cid, str):
        return None
    error = d.get("error")
    if isinstance(error, dict) and error:
        code = error.get("code")
        kind = classify_status(code) if isinstance(code, int) and code >= 400 else "transient"
        return cid, Response(error=kind, error_message=f"error {code} in batch: {error.get('message') or ''}".strip())
    try:
        return cid, response_from_gemini(d.get("response"))
    except ProviderError as e:
        return cid, Response(error=e.kind, error_message=e.message)


class GoogleBatches:
    provider = "google"
    limits = batch_limits("google")

    def __init__(self, live: GoogleProvider, *, api_key: str = "", timeout_s: float = 300.0) -> None:
        del api_key, timeout_s  # the live client's key and settings serve its batches
        import_sdk("google.genai", f"--batch with {live.spec.label}")  # lazy: only for --batch
        from google.genai import errors, types

        self._types, self._errors = types, errors
        self._live = live
        self._client = live._client  # the live client's settings: key, base URL, guarded transport

    def line(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> BatchLine:
        system, contents = gemini_contents(messages, images)
        config = generation_settings(self._live.spec.model, params)
        if system:
            config["system_instruction"] = system
        return BatchLine.of({"contents": [c.model_dump(mode="json", exclude_none=True) for c in contents],
                             "config": config})

    async def _call(self, fn: Any, **kw: Any) -> Any:
        try:
            return await fn(**kw)
        except self._errors.APIError as e:
            if e.code == 404:
                raise BatchGone(str(kw.get("name", ""))) from e
            raise ProviderError(classify_status(e.code or 500), f"HTTP {e.code}: {e.status or ''}".strip(),
                                status=e.code) from e
        except (ConnectionError, OSError) as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        src = [self._types.InlinedRequest.model_validate({**x.body, "metadata": {"custom_id": x.custom_id}})
               for x in lines]
        job = await self._call(self._client.aio.batches.create, model=self._live.spec.model, src=src,
                               config={"display_name": tag})
        return job.name

    def _status(self, job: Any) -> BatchStatus:
        stats = job.completion_stats
        done = (stats.successful_count or 0) if stats else 0
        failed = (stats.failed_count or 0) if stats else 0
        pending = (stats.incomplete_count or 0) if stats else 0
        return BatchStatus(job.name, state_of(job.state), total=done + failed + pending,  # type: ignore[arg-type]
                           done=done, failed=failed, provider_state=str(getattr(job.state, "value", job.state)),
                           tag=job.display_name)

    async def status(self, batch_id: str) -> BatchStatus:
        return self._status(await self._call(self._client.aio.batches.get, name=batch_id))

    async def results(self, batch_id: str) -> dict[str, Response]:
        job = await self._call(self._client.aio.batches.get, name=batch_id)
        out: dict[str, Response] = {}
        for item in (job.dest.inlined_responses or []) if job.dest else []:
            parsed = inline_result(item.model_dump(mode="json", exclude_none=True))
            if parsed is not None:
                out[parsed[0]] = parsed[1]
        return out

    async def find(self, tag: str, custom_ids: Sequence[str], since: float) -> list[BatchStatus]:
        pager = await self._call(self._client.aio.batches.list, config={"page_size": 100})
        seen = 0
        async for job in pager:
            if job.display_name == tag:
                return [self._status(job)]
            seen += 1
            if seen >= 100 * LIST_PAGES:
                break
        return []

    async def cancel(self, batch_id: str) -> None:
        await self._call(self._client.aio.batches.cancel, name=batch_id)

    async def close(self) -> None:
        return None  # the live provider owns the client
