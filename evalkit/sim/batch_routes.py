"""The three batch APIs on the simulated server, as their SDKs call them (read 2026-11-25 from the
SDKs' own resource code: openai 3.x `files`/`batches`, anthropic 2.x `messages.batches`,
google-genai 3.x `batches` in Gemini Developer API mode).

- OpenAI: `POST /v1/files` (multipart, purpose batch), `GET /v1/files/{id}[/content]`,
  `POST /v1/batches`, `GET /v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`; output and error files.
  Azure OpenAI: the same under `/openai/` (classic, with `?api-version=`) and `/openai/v1/`, its lines
  `"url": "/chat/completions"` and `body.model` the deployment (openai 3.x `AzureOpenAI`); one store. Lines
  for `/v1/responses` (`/responses` on Azure) are answered by the Responses dialect (evalkit.sim.openai.responses).
- Anthropic: `POST|GET /v1/messages/batches`, `GET /v1/messages/batches/{id}[/results]`,
  `POST /v1/messages/batches/{id}/cancel`.
- Gemini: `POST /v1beta/models/{model}:batchGenerateContent` (inline requests),
  `GET /v1beta/batches[/{id}]`, `POST /v1beta/batches/{id}:cancel`.
- `POST /sim/batch/config` sets the BatchBehaviour (delay, failures, expiry, frozen).

Each line is answered by the simulated model through the same dialect code as a live request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from evalkit.sim.dialects import DIALECTS
from evalkit.sim.machinery.batches import BatchStore, SimBatch
from evalkit.sim.machinery.state import STATE
from evalkit.sim.machinery.wire import BadRequest

BATCHES: web.AppKey[BatchStore] = web.AppKey("batches", BatchStore)
_DIALECT = {d.name: d for d in DIALECTS}
ModelReply = Callable[..., web.Response]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class _LineRequest:
    """What a dialect reads from a request besides its body (Gemini: the model in the path)."""

    match_info: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error", "code": status,
                                        "status": "NOT_FOUND" if status == 404 else "INVALID_ARGUMENT"}},
                             status=status)


class _Batches:
    """One server's batch store and what the three APIs' handlers share: a line answered as a live request
    with its body would be, a batch settled before it is shown, a page of a list."""

    def __init__(self, app: web.Application, model_reply: ModelReply) -> None:
        self.app, self.model_reply = app, model_reply
        self.store = app[BATCHES] = BatchStore()

    async def answer(self, b: SimBatch, cid: str, body: dict[str, Any]) -> tuple[Any, ...]:
        state = self.app[STATE]
        dialect = _DIALECT[b.tag.get("_dialect") or {"google": "gemini"}.get(b.api, b.api)]
        request = _LineRequest({"model": b.model}, b.headers)
        try:
            req = dialect.parse(body, request)  # type: ignore[arg-type]
            fps_info = [await state.image_info(u) for u in req.image_urls]
        except BadRequest as e:
            return ("error", 400, str(e))
        return ("ok", json.loads(self.model_reply(state, dialect, req, body, fps_info).body))

    async def find(self, batch_id: str) -> SimBatch | None:
        """The batch, settled if its time has come; None when there is no such batch."""
        b = self.store.batches.get(batch_id)
        if b is not None:
            await self.store.settle(b, self.answer)
        return b

    async def cancel(self, b: SimBatch) -> None:
        b.cancelled = True
        await self.store.settle(b, self.answer)

    async def page(self, api: str, request: web.Request, after_key: str) -> tuple[list[SimBatch], bool]:
        """One page of an API's batches, newest first, after the id the cursor names (settled first)."""
        mine = [b for b in reversed(self.store.batches.values()) if b.api == api]
        after = request.query.get(after_key)
        if after:
            ids = [b.id for b in mine]
            mine = mine[ids.index(after) + 1:] if after in ids else []
        limit = int(request.query.get("limit", 20))
        for b in mine[:limit]:
            await self.store.settle(b, self.answer)
        return mine[:limit], len(mine) > limit

    async def configure(self, request: web.Request) -> web.Response:
        """`POST /sim/batch/config`: the BatchBehaviour's fields to change."""
        self.store.behaviour.update(await request.json())
        return web.json_response({"ok": True})


class _OpenAI:
    """OpenAI's files and batches; Azure OpenAI's are the same calls under its own paths."""

    def __init__(self, batches: _Batches) -> None:
        self.batches, self.store = batches, batches.store

    def shown(self, b: SimBatch) -> dict[str, Any]:
        """The batch object, its output and error files written the first time it is shown ended."""
        st = self.store.state(b)
        status = {"running": "in_progress", "ended": "completed", "expired": "expired",
                  "cancelled": "cancelled"}[st]
        if st == "running" and b.cancelled:
            status = "cancelling"
        c = self.store.counts_of(b)
        self._write_files(b, st)
        return {"id": b.id, "object": "batch", "endpoint": b.tag.get("_endpoint", "/v1/chat/completions"), "errors": None,
                "input_file_id": b.tag.get("_input", ""), "completion_window": "24h", "status": status,
                "output_file_id": b.files.get("output"), "error_file_id": b.files.get("error"),
                "created_at": int(b.created), "in_progress_at": int(b.created), "expires_at": int(b.created) + 86400,
                "completed_at": int(b.ended_at) if st == "ended" and b.ended_at else None,
                "cancelled_at": int(b.ended_at) if st == "cancelled" and b.ended_at else None,
                "expired_at": int(b.ended_at) if st == "expired" and b.ended_at else None,
                "request_counts": {"total": c["total"], "completed": c["succeeded"], "failed": c["failed"]},
                "metadata": {k: v for k, v in b.tag.items() if not k.startswith("_")} or None,
                "model": b.model or None}

    def _write_files(self, b: SimBatch, st: str) -> None:
        if b.files:
            return
        if st == "ended":
            ok = [(cid, o) for cid, o in b.results if o[0] == "ok"]
            bad = [(cid, o) for cid, o in b.results if o[0] != "ok"]
            for kind, rows in (("output", ok), ("error", bad)):
                if rows:
                    b.files[kind] = self._new_file(b"".join(json.dumps(_openai_line(cid, o)).encode() + b"\n"
                                                            for cid, o in rows))
        elif st in ("expired", "cancelled") and b.results:
            b.files["error"] = self._new_file(b"".join(json.dumps(_openai_line(cid, o, st)).encode() + b"\n"
                                                       for cid, o in b.results))

    def _new_file(self, data: bytes) -> str:
        fid = self.store.new_id("file-")
        self.store.files[fid] = data
        return fid

    async def create_file(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        data = upload.file.read() if hasattr(upload, "file") else str(upload or "").encode()
        fid = self._new_file(data)
        return web.json_response({"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                                  "filename": getattr(upload, "filename", "upload.jsonl"),
                                  "purpose": str(form.get("purpose", "batch")), "status": "processed"})

    async def get_file(self, request: web.Request) -> web.Response:
        fid = request.match_info["file_id"]
        if fid not in self.store.files:
            return _error(404, f"No such File object: {fid}")
        if request.path.endswith("/content"):
            return web.Response(body=self.store.files[fid], content_type="application/octet-stream")
        return web.json_response({"id": fid, "object": "file", "bytes": len(self.store.files[fid]),
                                  "created_at": int(time.time()), "filename": fid, "purpose": "batch",
                                  "status": "processed"})

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        fid = body.get("input_file_id")
        if fid not in self.store.files:
            return _error(400, f"input_file_id {fid!r} not found")
        lines, model = [], ""
        for raw in self.store.files[fid].splitlines():
            if raw.strip():
                row = json.loads(raw)
                lines.append((row["custom_id"], row["body"]))
                model = model or row["body"].get("model", "")
        if len({cid for cid, _ in lines}) != len(lines):
            return _error(400, "custom_id values must be unique within a batch")
        endpoint = str(body.get("endpoint") or "/v1/chat/completions")  # Azure says "/chat/completions"
        b = self.store.add(SimBatch(self.store.new_id("batch_"), "openai", lines, time.time(),
                                    tag={**(body.get("metadata") or {}), "_input": fid, "_endpoint": endpoint,
                                         "_dialect": _line_dialect(request.path, endpoint)},
                                    model=model))
        return web.json_response(self.shown(b))

    async def get(self, request: web.Request) -> web.Response:
        """`GET .../batches/{id}`, and `POST .../batches/{id}/cancel`."""
        b = await self.batches.find(request.match_info["batch_id"])
        if b is None or b.api != "openai":
            return _error(404, f"No batch found with id '{request.match_info['batch_id']}'")
        if request.path.endswith("/cancel"):
            await self.batches.cancel(b)
        return web.json_response(self.shown(b))

    async def list(self, request: web.Request) -> web.Response:
        batches, more = await self.batches.page("openai", request, "after")
        page = [self.shown(b) for b in batches]
        return web.json_response({"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                                  "last_id": page[-1]["id"] if page else None, "has_more": more})


class _Anthropic:
    """Anthropic's message batches."""

    def __init__(self, batches: _Batches) -> None:
        self.batches, self.store = batches, batches.store

    def shown(self, b: SimBatch, request: web.Request) -> dict[str, Any]:
        st = self.store.state(b)
        c = self.store.counts_of(b)
        kinds = [o for _, o in b.results]
        return {"id": b.id, "type": "message_batch",
                "processing_status": "ended" if st != "running" else "canceling" if b.cancelled else "in_progress",
                "request_counts": {"processing": c["processing"], "succeeded": c["succeeded"],
                                   "errored": sum(1 for o in kinds if o[0] == "error" and o[1]),
                                   "canceled": len(kinds) if st == "cancelled" else 0,
                                   "expired": len(kinds) if st == "expired" else 0},
                "created_at": _iso(b.created), "expires_at": _iso(b.created + 86400), "ended_at": _iso(b.ended_at),
                "archived_at": None, "cancel_initiated_at": _iso(b.ended_at) if b.cancelled else None,
                "results_url": (f"{request.scheme}://{request.host}/v1/messages/batches/{b.id}/results"
                                if st != "running" else None)}

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        requests = body.get("requests") or []
        lines = [(r["custom_id"], r["params"]) for r in requests]
        if not lines or len({cid for cid, _ in lines}) != len(lines):
            return _error(400, "requests: custom_id values must be unique and at least one request given")
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() == "anthropic-version"}
        b = self.store.add(SimBatch(self.store.new_id("msgbatch_"), "anthropic", lines, time.time(), headers=headers))
        return web.json_response(self.shown(b, request))

    async def get(self, request: web.Request) -> web.StreamResponse:
        """`GET .../batches/{id}[/results]`, and `POST .../batches/{id}/cancel`."""
        b = await self.batches.find(request.match_info["batch_id"])
        if b is None or b.api != "anthropic":
            return web.json_response({"type": "error", "error": {"type": "not_found_error",
                                                                 "message": "batch not found"}}, status=404)
        if request.path.endswith("/cancel"):
            await self.batches.cancel(b)
        if request.path.endswith("/results"):
            if self.store.state(b) == "running":
                return _error(400, "batch still in progress")
            st = self.store.state(b)
            out = b"".join(json.dumps({"custom_id": cid, "result": _anthropic_result(o, st)}).encode() + b"\n"
                           for cid, o in b.results)
            return web.Response(body=out, content_type="application/binary")
        return web.json_response(self.shown(b, request))

    async def list(self, request: web.Request) -> web.Response:
        batches, more = await self.batches.page("anthropic", request, "after_id")
        page = [self.shown(b, request) for b in batches]
        return web.json_response({"data": page, "has_more": more,
                                  "first_id": page[0]["id"] if page else None,
                                  "last_id": page[-1]["id"] if page else None})


class _Gemini:
    """Gemini's batch operations (inline requests)."""

    def __init__(self, batches: _Batches) -> None:
        self.batches, self.store = batches, batches.store

    def shown(self, b: SimBatch) -> dict[str, Any]:
        st = self.store.state(b)
        state = {"running": "BATCH_STATE_RUNNING", "ended": "BATCH_STATE_SUCCEEDED",
                 "expired": "BATCH_STATE_EXPIRED", "cancelled": "BATCH_STATE_CANCELLED"}[st]
        meta: dict[str, Any] = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                                "model": f"models/{b.model}", "displayName": b.tag.get("displayName"),
                                "state": state, "createTime": _iso(b.created), "updateTime": _iso(b.ended_at or b.created)}
        if st == "ended":
            meta["endTime"] = _iso(b.ended_at)
            meta["output"] = {"inlinedResponses": {"inlinedResponses": [_gemini_item(cid, o) for cid, o in b.results]}}
        return {"name": b.id, "metadata": meta, "done": st != "running"}

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        batch = body.get("batch") or {}
        items = (((batch.get("inputConfig") or {}).get("requests") or {}).get("requests")) or []
        lines = [((it.get("metadata") or {}).get("custom_id", str(i)), it.get("request") or {})
                 for i, it in enumerate(items)]
        model = request.match_info["model"]
        b = self.store.add(SimBatch(self.store.new_id("batches/"), "google", lines, time.time(),
                                    tag={"displayName": batch.get("displayName")}, model=model))
        b.tag["_metadata"] = [it.get("metadata") for it in items]
        return web.json_response(self.shown(b))

    async def get(self, request: web.Request) -> web.Response:
        """`GET .../batches/{id}`, and `POST .../batches/{id}:cancel`."""
        name = "batches/" + request.match_info["batch_id"]
        cancel = name.endswith(":cancel")
        b = await self.batches.find(name.removesuffix(":cancel"))
        if b is None or b.api != "google":
            return web.json_response({"error": {"code": 404, "message": f"{name} not found", "status": "NOT_FOUND"}},
                                     status=404)
        if cancel:
            await self.batches.cancel(b)
            return web.json_response({})
        return web.json_response(self.shown(b))

    async def list(self, request: web.Request) -> web.Response:
        mine = [b for b in reversed(self.store.batches.values()) if b.api == "google"]
        start = int(request.query.get("pageToken") or 0)
        size = int(request.query.get("pageSize") or 50)
        for b in mine[start:start + size]:
            await self.store.settle(b, self.batches.answer)
        out: dict[str, Any] = {"operations": [self.shown(b) for b in mine[start:start + size]]}
        if len(mine) > start + size:
            out["nextPageToken"] = str(start + size)
        return web.json_response(out)


def _either(gemini: Handler, openai: Handler) -> Handler:
    """/v1/batches is both OpenAI's and (as google-genai calls it with a base URL) Gemini's path:
    a Gemini client is known by its key header."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return await (gemini if "x-goog-api-key" in request.headers else openai)(request)

    return handle


def add_batch_routes(app: web.Application, model_reply: ModelReply) -> None:
    """The three batch APIs on `app`, their lines answered by `model_reply`, and `POST /sim/batch/config`."""
    batches = _Batches(app, model_reply)
    openai, anthropic, gemini = _OpenAI(batches), _Anthropic(batches), _Gemini(batches)
    r = app.router
    r.add_post("/v1/files", openai.create_file)
    r.add_get("/v1/files/{file_id}", openai.get_file)
    r.add_get("/v1/files/{file_id}/content", openai.get_file)
    r.add_post("/v1/batches", openai.create)
    r.add_get("/v1/batches", _either(gemini.list, openai.list))
    r.add_get("/v1/batches/{batch_id}", _either(gemini.get, openai.get))
    r.add_post("/v1/batches/{batch_id}", gemini.get)  # {id}:cancel (Gemini, under /v1)
    r.add_post("/v1/batches/{batch_id}/cancel", openai.get)
    for prefix in ("/openai", "/openai/v1"):  # Azure OpenAI's classic and v1 paths to OpenAI's batch API
        r.add_post(f"{prefix}/files", openai.create_file)
        r.add_get(prefix + "/files/{file_id}", openai.get_file)
        r.add_get(prefix + "/files/{file_id}/content", openai.get_file)
        r.add_post(f"{prefix}/batches", openai.create)
        r.add_get(f"{prefix}/batches", openai.list)
        r.add_get(prefix + "/batches/{batch_id}", openai.get)
        r.add_post(prefix + "/batches/{batch_id}/cancel", openai.get)
    r.add_post("/v1/messages/batches", anthropic.create)
    r.add_get("/v1/messages/batches", anthropic.list)
    r.add_get("/v1/messages/batches/{batch_id}", anthropic.get)
    r.add_get("/v1/messages/batches/{batch_id}/results", anthropic.get)
    r.add_post("/v1/messages/batches/{batch_id}/cancel", anthropic.get)
    r.add_post("/{version:v1|v1beta|v1alpha}/models/{model}:batchGenerateContent", gemini.create)
    r.add_get("/{version:v1beta|v1alpha}/batches", gemini.list)
    r.add_get("/{version:v1beta|v1alpha}/batches/{batch_id}", gemini.get)
    r.add_post("/{version:v1beta|v1alpha}/batches/{batch_id}", gemini.get)  # {id}:cancel
    r.add_post("/sim/batch/config", batches.configure)


def _line_dialect(path: str, endpoint: str) -> str:
    """The dialect answering an OpenAI-shaped batch's lines: Azure's or OpenAI's, chat or Responses (issue 47)."""
    azure = path.startswith("/openai/")
    if endpoint.endswith("/responses"):
        return "azure-responses" if azure else "openai-responses"
    return "azure" if azure else "openai"


def _openai_line(cid: str, outcome: tuple[Any, ...], state: str = "ended") -> dict[str, Any]:
    if outcome[0] == "ok":
        return {"id": f"batch_req_{cid}", "custom_id": cid, "error": None,
                "response": {"status_code": 200, "request_id": f"req_{cid}", "body": outcome[1]}}
    if state in ("expired", "cancelled") or not outcome[1]:
        code = "batch_expired" if state == "expired" else "batch_cancelled"
        return {"id": f"batch_req_{cid}", "custom_id": cid, "response": None,
                "error": {"code": code, "message": f"This request could not be executed before the batch {state}."}}
    return {"id": f"batch_req_{cid}", "custom_id": cid, "error": None,
            "response": {"status_code": outcome[1], "request_id": f"req_{cid}",
                         "body": {"error": {"message": outcome[2], "type": "server_error" if outcome[1] >= 500
                                            else "invalid_request_error"}}}}


def _anthropic_result(outcome: tuple[Any, ...], state: str) -> dict[str, Any]:
    if outcome[0] == "ok":
        return {"type": "succeeded", "message": outcome[1]}
    if state == "expired":
        return {"type": "expired"}
    if state == "cancelled":
        return {"type": "canceled"}
    etype = "api_error" if outcome[1] >= 500 else "invalid_request_error"
    return {"type": "errored", "error": {"type": "error", "error": {"type": etype, "message": outcome[2]}}}


def _gemini_item(cid: str, outcome: tuple[Any, ...]) -> dict[str, Any]:
    if outcome[0] == "ok":
        return {"response": outcome[1], "metadata": {"custom_id": cid}}
    return {"error": {"code": outcome[1] or 500, "message": outcome[2]}, "metadata": {"custom_id": cid}}
