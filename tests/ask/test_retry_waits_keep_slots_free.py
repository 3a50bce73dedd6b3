"""Queries waiting out a Retry-After do not keep the others from being sent: at --concurrency C the
server still gets C requests at once.

At --concurrency 16 the runner has 32 workers. 0.3.0 let at most C + 4 queries hold prepared images,
and a query waiting to retry held its place, so with W queries waiting, only 20 - W requests could be
in flight (the 20,000-query load at 30 % faults: 40 in flight of 128). A query whose pictures are
already in the image memo adds no image to memory and takes no such place.

The simulator refuses about half of the first requests with a 429 and a 60 s Retry-After (the
longest honoured), then holds every later reply at its gate, so what is in flight stays at the gate
to be counted. Synchronised on the server's counters, never on the clock, but for the deadline.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from evalkit.sim import SimConfig, SimFaults, SimThread
from evalkit.sim.from_bench import answer_key_for

CONCURRENCY, FIRST = 16, 20
DEADLINE_S = 45.0  # well inside the 60 s that the refused queries wait


def _mcq_on_few_images(folder: Path, n: int, images: int) -> Path:
    """n questions on `images` pictures, consecutive questions on the same one (MME-RealWorld's shape)."""
    (folder / "images").mkdir(parents=True)
    rng = random.Random(3)
    for i in range(images):
        Image.new("RGB", (48, 48), tuple(rng.randrange(256) for _ in range(3))).save(folder / f"images/{i}.png")
    lines = [{"id": f"q{i:04d}", "image": f"images/{i * images // n}.png", "question": f"Question {i}: which colour?",
              "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"}, "answer": "ABCD"[i % 4],
              "category": "c"} for i in range(n)]
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.mark.slow  # an evalkit process against the simulator
def test_queries_waiting_to_retry_leave_every_request_slot_to_the_others(tmp_path):
    data = _mcq_on_few_images(tmp_path / "ds", 200, 4)
    faults = SimFaults(rate=0.5, kinds=("429",), retry_after=60.0, seed=11)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), faults=faults)) as sim:
        sim.hold(after=FIRST)  # FIRST replies (about half of them 429s), then every later reply waits
        cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model", "--data", str(data),
               "--base-url", sim.url, "--out", str(tmp_path / "run"), "--no-cache", "--no-progress",
               "--concurrency", str(CONCURRENCY), "--no-adaptive", "--no-group-images"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + DEADLINE_S
            while sim.held < CONCURRENCY and time.monotonic() < deadline:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.05)
            held, refused = sim.held, sim.counters.snapshot()["rate_limited"]
        finally:
            proc.kill()
            proc.wait(timeout=30)
            sim.release()
    assert 4 < refused <= CONCURRENCY  # queries waiting out their Retry-After, fewer than the workers left
    assert held == CONCURRENCY, (f"{held} requests in flight at --concurrency {CONCURRENCY} while {refused} "
                                 "queries wait to retry: the waiting queries kept the rest from being sent")
