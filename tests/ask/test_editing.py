"""Image editing: both SDKs against the simulator, and run_edits' retries, cache and resume."""

from __future__ import annotations

import importlib.util
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from hostile_routes import HostileRoutes
from PIL import Image
from synthetic_data import draw_image

from evalkit.ask.editing import GENVIP_INSTRUCTION, EditRequest, create_editor, run_edits
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.store.cache import NullCache, ResponseCache
from evalkit.core.errors import EvalkitError, ProviderError
from evalkit.core.types import ImagePart, ImageRef
from evalkit.images.pipeline import ImagePipeline
from evalkit.sim import SimConfig, SimFaults, SimServer, start_sim
from evalkit.sim.openai.edits import server_edit_key, simulated_edit

ENV = {"OPENAI_API_KEY": "sk-test", "GEMINI_API_KEY": "gm-test"}


def pixels(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def write_images(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"ir{i:03d}.png"
        draw_image(1000 + i, 64).save(path)
        paths.append(path)
    return paths


def requests_for(paths: list[Path], instruction: str = GENVIP_INSTRUCTION) -> list[EditRequest]:
    return [EditRequest(p.stem, ImageRef.from_path(str(p)), instruction) for p in paths]


@pytest.fixture
async def sim() -> AsyncIterator[SimServer]:
    server = await start_sim(SimConfig())
    yield server
    await server.close()


async def edit_all(server: SimServer, reqs: list[EditRequest], out_dir: Path, cache, **kw) -> list:
    editor = create_editor("openai/gpt-image-1", [server.url + "/v1"], ENV)
    pipeline = ImagePipeline()
    try:
        return await run_edits(reqs, editor, out_dir=out_dir, cache=cache, limiter=Limiter(concurrency=8),
                               pipeline=pipeline, concurrency=8, max_attempts=kw.pop("max_attempts", 12),
                               timeout_s=10.0, backoff_s=0.01, **kw)
    finally:
        await editor.close()
        pipeline.close()


async def test_openai_sdk_edit_returns_the_simulated_edit(sim: SimServer, tmp_path: Path) -> None:
    src = write_images(tmp_path / "in", 1)[0].read_bytes()
    editor = create_editor("openai/gpt-image-1", [sim.url + "/v1"], ENV)
    pipeline = ImagePipeline()
    try:
        image = pipeline.prepare(ImagePart(ImageRef.from_bytes(src)))
        data, mime, usage = await editor.edit(image, GENVIP_INSTRUCTION, {"size": "auto", "quality": "low"})
    finally:
        await editor.close()
        pipeline.close()
    assert mime == "image/png"
    assert np.array_equal(pixels(data), pixels(simulated_edit(src)))
    assert not np.array_equal(pixels(data), pixels(src))  # it is an edit, not an echo
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    snap = sim.counters.snapshot()
    assert snap["requests"] == 1 and snap["per_key"] == {server_edit_key(GENVIP_INSTRUCTION, [src]): 1}


async def test_google_genai_edit_returns_the_simulated_edit(sim: SimServer, tmp_path: Path) -> None:
    if importlib.util.find_spec("evalkit.sim.gemini") is None:
        pytest.skip("Gemini dialect not present")
    src = write_images(tmp_path / "in", 1)[0].read_bytes()
    editor = create_editor("google/gemini-2.5-flash-image", [sim.url], ENV)
    pipeline = ImagePipeline()
    try:
        image = pipeline.prepare(ImagePart(ImageRef.from_bytes(src)))
        data, mime, _usage = await editor.edit(image, GENVIP_INSTRUCTION)
    finally:
        await editor.close()
        pipeline.close()
    assert mime.startswith("image/")
    assert np.array_equal(pixels(data), pixels(simulated_edit(src)))
    assert sim.counters["requests"] == 1

    paths = write_images(tmp_path / "many", 3)
    editor = create_editor("google/gemini-2.5-flash-image", [sim.url], ENV)
    pipeline = ImagePipeline()
    try:
        results = await run_edits(requests_for(paths), editor, out_dir=tmp_path / "out", cache=NullCache(),
                                  limiter=Limiter(concurrency=4), pipeline=pipeline, backoff_s=0.01)
    finally:
        await editor.close()
        pipeline.close()
    assert sim.counters["requests"] == 4
    for p, r in zip(paths, results, strict=True):
        assert r.ok and r.usage["output_tokens"] > 0
        assert np.array_equal(pixels(Path(str(r.path)).read_bytes()), pixels(simulated_edit(p.read_bytes())))


async def test_run_edits_under_faults_delivers_each_edit_once_and_reruns_for_free(tmp_path: Path) -> None:
    faults = SimFaults(rate=0.3, kinds=("429", "500", "drop"), retry_after=0.05, seed=7)
    paths = write_images(tmp_path / "in", 20)
    reqs = requests_for(paths)
    async with await start_sim(SimConfig(faults=faults)) as server:
        with ResponseCache(tmp_path / "cache") as cache:
            seen: list[str] = []
            results = await edit_all(server, reqs, tmp_path / "out", cache, progress=lambda r: seen.append(r.id))
            snap = server.counters.snapshot()
            assert sum(snap["faults"].values()) > 0  # the faults really happened
            assert [r.id for r in results] == [r.id for r in reqs] and sorted(seen) == sorted(r.id for r in reqs)
            assert all(r.ok and r.source == "network" and not r.cached for r in results)
            keys = {server_edit_key(GENVIP_INSTRUCTION, [p.read_bytes()]) for p in paths}
            assert set(snap["per_key"]) == keys and set(snap["per_key"].values()) == {1}
            assert snap["completions"] == 20
            for p, r in zip(paths, results, strict=True):
                out = tmp_path / "out" / f"{p.stem}.png"
                assert r.path == str(out)
                assert np.array_equal(pixels(out.read_bytes()), pixels(simulated_edit(p.read_bytes())))
            lines = [json.loads(x) for x in (tmp_path / "out" / "edits.jsonl").read_text().splitlines()]
            assert sorted(x["id"] for x in lines) == sorted(r.id for r in reqs)

            # Same out_dir: served by the outputs of the first run, not one request sent.
            before = server.counters["requests"]
            again = await edit_all(server, reqs, tmp_path / "out", cache)
            assert server.counters["requests"] == before
            assert all(r.source == "output" and r.cached for r in again)
            assert [r.image_bytes for r in again] == [r.image_bytes for r in results]
            # A fresh out_dir with the same cache: served by the cache, files written again.
            fresh = await edit_all(server, reqs, tmp_path / "out2", cache)
            assert server.counters["requests"] == before
            assert all(r.source == "cache" for r in fresh)
            assert all((tmp_path / "out2" / f"{p.stem}.png").read_bytes() == (tmp_path / "out" / f"{p.stem}.png")
                       .read_bytes() for p in paths)


async def test_killed_half_way_resumes_with_only_the_missing_edits(sim: SimServer, tmp_path: Path) -> None:
    reqs = requests_for(write_images(tmp_path / "in", 20))
    out = tmp_path / "out"
    first = await edit_all(sim, reqs[:10], out, NullCache())  # no cache: only the files can resume
    assert all(r.ok for r in first) and sim.counters["requests"] == 10
    with (out / "edits.jsonl").open("a") as f:
        f.write('{"id": "ir019", "fi')  # a line cut short by the kill
    results = await edit_all(sim, reqs, out, NullCache(), keep_images=False)
    assert sim.counters["requests"] == 20 and sim.counters["completions"] == 20
    assert [r.source for r in results] == ["output"] * 10 + ["network"] * 10
    assert all(r.image_bytes is None and Path(str(r.path)).exists() for r in results)


async def test_changed_instruction_is_not_served_by_stale_outputs(sim: SimServer, tmp_path: Path) -> None:
    reqs = requests_for(write_images(tmp_path / "in", 2))
    await edit_all(sim, reqs, tmp_path / "out", NullCache())
    other = await edit_all(sim, requests_for(write_images(tmp_path / "in", 2), "Make it sepia."),
                           tmp_path / "out", NullCache())
    assert sim.counters["requests"] == 4 and all(r.source == "network" for r in other)


async def test_refusals_are_not_retried_and_are_errors_not_files(tmp_path: Path) -> None:
    reqs = requests_for(write_images(tmp_path / "in", 3))
    async with await start_sim(SimConfig(faults=SimFaults(rate=1.0, kinds=("refusal",)))) as server:
        results = await edit_all(server, reqs, tmp_path / "out", NullCache())
        assert server.counters["requests"] == 3
    assert [r.error for r in results] == ["refused"] * 3
    assert all(r.image_bytes is None and r.path is None for r in results)
    assert not list((tmp_path / "out").glob("*.png"))
    lines = [json.loads(x) for x in (tmp_path / "out" / "edits.jsonl").read_text().splitlines()]
    assert [x["error"] for x in lines] == ["refused"] * 3


async def test_transient_errors_left_after_retries_are_values(tmp_path: Path) -> None:
    reqs = requests_for(write_images(tmp_path / "in", 2))
    async with await start_sim(SimConfig(faults=SimFaults(rate=1.0, kinds=("500",)))) as server:
        results = await edit_all(server, reqs, tmp_path / "out", NullCache(), max_attempts=3)
        assert server.counters["requests"] == 6
    assert [r.error for r in results] == ["transient", "transient"]


def test_missing_keys_and_unknown_providers_are_usage_errors() -> None:
    with pytest.raises(EvalkitError, match="OPENAI_API_KEY"):
        create_editor("openai/gpt-image-1", env={})
    with pytest.raises(EvalkitError, match="GEMINI_API_KEY"):
        create_editor("google/gemini-2.5-flash-image", env={"OPENAI_API_KEY": "x"})
    with pytest.raises(EvalkitError, match="cannot edit images"):
        create_editor("anthropic/claude-sonnet-4", env=ENV)
    with pytest.raises(EvalkitError, match="malformed"):
        create_editor("gpt-image-1", env=ENV)


async def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    path = write_images(tmp_path / "in", 1)[0]
    reqs = [EditRequest("same", ImageRef.from_path(str(path)), "x")] * 2
    editor, pipeline = create_editor("openai/gpt-image-1", ["http://127.0.0.1:9/v1"], ENV), ImagePipeline()
    with pytest.raises(EvalkitError, match="duplicate edit id"):
        await run_edits(reqs, editor, out_dir=tmp_path / "out", cache=NullCache(), limiter=Limiter(),
                        pipeline=pipeline)
    await editor.close()
    pipeline.close()


async def test_the_google_editor_follows_no_redirect_and_sends_its_key_nowhere_else(tmp_path: Path) -> None:
    src = write_images(tmp_path / "in", 1)[0].read_bytes()
    hostile = HostileRoutes()
    async with await start_sim(SimConfig(), routes=hostile) as sim:
        editor = create_editor("google/gemini-2.5-flash-image", [sim.url + "/hostile/redirect-307"], ENV)
        pipeline = ImagePipeline()
        try:
            image = pipeline.prepare(ImagePart(ImageRef.from_bytes(src)))
            with pytest.raises(ProviderError) as info:
                await editor.edit(image, GENVIP_INSTRUCTION)
        finally:
            await editor.close()
            pipeline.close()
    assert info.value.kind == "permanent" and "redirect" in info.value.message
    assert hostile.log.snapshot()["sink"] == []  # nothing, and so no key, reached the other origin
