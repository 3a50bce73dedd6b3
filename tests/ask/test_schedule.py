"""Prompt-cache-friendly scheduling: same-image questions back to back, primer first."""

from __future__ import annotations

import json

from synthetic_data import draw_image

from evalkit.ask.schedule import group_by_image
from evalkit.core.types import ImagePart, ImageRef, Message, Query
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.prompt_cache import PrefixCache, server_openai_image_tokens
from evalkit.sim.server import SimConfig, SimThread


def _q(i: int, image: str | None) -> Query:
    parts = [ImagePart(ImageRef.from_path(image))] if image else []
    return Query(id=f"q{i}", item_id=f"q{i}", base_id=f"q{i}", variant={}, gold="A",
                 messages=(Message.user(*parts, f"question {i}"),))


def test_group_by_image_sends_primers_first_then_followers():
    qs = [_q(0, "a"), _q(1, "b"), _q(2, "a"), _q(3, None), _q(4, "c"), _q(5, "b"), _q(6, "a")]
    order = [q.id for q in group_by_image(qs, window=2)]
    assert order == ["q0", "q1", "q2", "q6", "q5", "q4", "q3"]
    assert sorted(order) == sorted(q.id for q in qs)  # nothing lost or repeated


def test_prefix_cache_follows_the_1024_token_rule():
    cache = PrefixCache()
    big = [("img:x", server_openai_image_tokens(1536, 768)), ("txt:q1", 10)]
    assert server_openai_image_tokens(1536, 768) == 85 + 170 * 6
    assert cache.lookup_and_store(big) == 0  # first sight: written, not read
    assert cache.lookup_and_store([("img:x", 1105), ("txt:q2", 10)]) == 1024  # 1105 -> 1024 + 0*128
    small = [("img:y", 255), ("txt:q", 10)]
    cache.lookup_and_store(small)
    assert cache.lookup_and_store(small) == 0  # under 1,024 tokens: never cached


def _shared_image_set(folder, n_images: int, per_image: int):
    (folder / "images").mkdir(parents=True)
    lines = []
    for i in range(n_images):
        draw_image(500 + i, size=96).resize((1536, 768)).save(folder / "images" / f"{i}.jpg", quality=80)
        for j in range(per_image):
            lines.append({"id": f"i{i}-q{j}", "image": f"images/{i}.jpg", "question": f"Question {j} on {i}?",
                          "options": {"A": "yes", "B": "no", "C": "maybe", "D": "unsure"}, "answer": "ABCD"[j % 4]})
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return data


def test_grouped_scheduling_hits_the_prompt_cache(tmp_path):
    data = _shared_image_set(tmp_path / "ds", n_images=12, per_image=8)
    key = answer_key_for("mcq", {"data": str(data)})
    shares = {}
    for grouped in (True, False):
        with SimThread(SimConfig(answer_key=key, latency_s=0.05)) as sim:
            res = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / f"r{grouped}"),
                      no_cache=True, progress=False, concurrency=16, group_images=grouped)
        followers = [r for r in res.records if not r.item_id.endswith("-q0")]
        shares[grouped] = sum(r.usage["cached_input_tokens"] > 0 for r in followers) / len(followers)
        assert res.summary["metrics"]["accuracy"] == 100.0
        assert res.summary["usage"]["cached_input_tokens"] == sum(r.usage["cached_input_tokens"] for r in res.records)
    assert shares[True] >= 0.8  # followers wait for their primer: nearly all hit
    assert shares[False] < 0.5  # sent together, same-image queries all miss
