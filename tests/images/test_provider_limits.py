"""A 12 MB, 9000x6000 photo goes to each provider with documented image limits (the registry's, on the
simulator's plain routes) within those limits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from sim_providers import Providers, base_url, key_env, on_plain_routes

from evalkit.engine.evaluate import run
from evalkit.images.provider_limits import encoded_size
from evalkit.providers.registry import limits_for
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

LIMITED = Providers(lambda r: on_plain_routes(r) and r.image_limits.max_side is not None)  # documented limits


@pytest.fixture(scope="module")
def huge_item(tmp_path_factory):
    folder = tmp_path_factory.mktemp("huge")
    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (1000, 1500, 3), dtype=np.uint8)
    Image.fromarray(small).resize((9000, 6000), Image.Resampling.BILINEAR).save(folder / "big.jpg", quality=80)
    assert (folder / "big.jpg").stat().st_size > 12_000_000
    line = {"id": "big", "image": "big.jpg", "question": "What is shown?",
            "options": {"A": "noise", "B": "a cat", "C": "a dog", "D": "a car"}, "answer": "A"}
    (folder / "data.jsonl").write_text(json.dumps(line) + "\n")
    return folder / "data.jsonl"


@pytest.mark.parametrize("provider", LIMITED)
def test_huge_image_fits_each_provider(tmp_path, huge_item, provider):
    key = answer_key_for("mcq", {"data": str(huge_item)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        res = run("mcq", f"{provider}/sim-model", data=str(huge_item), base_url=base_url(provider, sim.url),
                  env=key_env(provider, "sk-test"), out=str(tmp_path / provider), no_cache=True, progress=False)
    rec = res.records[0]
    assert rec.error is None and rec.correct  # the simulated model recognised the resized image
    (w, h), lim = rec.image_sizes[0], limits_for(provider)
    assert w / h == pytest.approx(1.5, rel=0.01)  # aspect kept
    assert max(w, h) <= lim.max_side and (lim.max_pixels is None or w * h <= lim.max_pixels)
    assert max(w, h) >= min(lim.max_side, 1000)  # not shrunk needlessly
    saved = json.loads((tmp_path / provider / "records.jsonl").read_text())
    assert saved["image_sizes"] == [[w, h]]


def test_openai_compatible_servers_get_images_as_they_are(tmp_path, huge_item):
    key = answer_key_for("mcq", {"data": str(huge_item)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        res = run("mcq", "vllm/sim-model", data=str(huge_item), base_url=sim.url, out=str(tmp_path / "v"),
                  no_cache=True, progress=False)
        as_is = res.records[0].image_sizes
        res = run("mcq", "vllm/sim-model", data=str(huge_item), base_url=sim.url, out=str(tmp_path / "w"),
                  no_cache=True, progress=False, max_side=1024)
    assert as_is == [[9000, 6000]] and res.records[0].image_sizes == [[1024, 683]]
    assert encoded_size(3) == 4
