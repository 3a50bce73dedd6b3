"""An image path that leads outside the data folder (absolute, `../`, a symlink) is refused before
anything is read or sent, unless --allow-outside-images says the user meant it."""

from __future__ import annotations

import json
import os

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.sim.server import SimConfig, SimThread


def _point_item_at(data, index: int, path: str) -> None:
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    rows[index]["image"] = path
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_an_image_outside_the_data_folder_needs_the_flag(tmp_path, how):
    data = make_mcq_jsonl(tmp_path / "ds", 5, seed=8)
    secret = tmp_path / "private" / "holiday.png"
    secret.parent.mkdir()
    (tmp_path / "ds" / "images" / "img00001.png").rename(secret)
    if how == "absolute":
        _point_item_at(data, 1, str(secret))
    elif how == "dotdot":
        _point_item_at(data, 1, "images/../../private/holiday.png")
    else:
        os.symlink(secret, tmp_path / "ds" / "images" / "img00001.png")
    args = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--no-progress",
            "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run")]
    with SimThread(SimConfig()) as sim:
        refused = run_main([*args, "--base-url", sim.url])
        sent = sim.counters.snapshot()["requests"]
        wrote = (tmp_path / "run").exists()
        allowed = run_main([*args, "--base-url", sim.url, "--allow-outside-images"])
        sent_after = sim.counters.snapshot()["requests"]
    assert refused.returncode == 2 and sent == 0
    last = refused.stderr.strip().splitlines()[-1]
    assert "item 'q00001'" in last and "outside the data folder" in last and "--allow-outside-images" in last
    assert not wrote  # refused before the run directory was made
    assert allowed.returncode == 0, allowed.stderr
    assert sent_after == 5  # told, it reads the file where it is
