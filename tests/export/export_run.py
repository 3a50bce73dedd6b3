"""One small finished run for the export tests: MCQ with circular shifts (6 questions, 24 queries) against
the simulator, asked with a canary API key in the environment that no export may carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

CANARY = "sk-canary-export-7f3a9c1e"  # the key the run was asked with: never in any export
N_ITEMS = 6


def make_export_run(folder: Path) -> Path:
    """The run directory (with one small plot in plots/, as drawn runs have)."""
    data = make_mcq_jsonl(folder / "ds", N_ITEMS, seed=2)
    prices = folder / "prices.json"
    prices.write_text(json.dumps({"vllm/sim-model": {"input": 2.5, "output": 10}}), encoding="utf-8")
    key = answer_key_for("mcq", {"data": str(data), "circular": True})
    out = folder / "run"
    env = {"VLLM_API_KEY": CANARY, "OPENAI_API_KEY": CANARY}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        config = SimConfig(answer_key=key, params=SimParams(theta=0.7, r=0.8, seed=3), api_key=CANARY)
        with SimThread(config) as sim:
            result = run("mcq", "vllm/sim-model", data=str(data), circular=True, base_url=sim.url + "/v1", env=env,
                         out=str(out), progress=False, cache_dir=str(folder / "cache"), plots=False,
                         prices=str(prices))
    assert result.exit_code == 0, result.messages
    (out / "plots").mkdir(exist_ok=True)
    Image.new("RGB", (4, 4), (200, 10, 10)).save(out / "plots" / "tiny.png")
    return out


def canary_in(folder: Path) -> list[Path]:
    """Files under `folder` holding the canary key (as text or bytes)."""
    return [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and CANARY.encode() in p.read_bytes()]
