"""A bad image found mid-run is that query's recorded error: everything else is answered, recorded
and cached, and a re-run pays for nothing again."""

from __future__ import annotations

import json

from synthetic_data import make_mcq_jsonl

from evalkit.cli import main
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def test_a_corrupt_image_mid_run_costs_only_its_own_query(tmp_path, capsys, no_plots):
    n = 40
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=4)
    key = answer_key_for("mcq", {"data": str(data)})  # the key knows every picture; then one goes bad
    (tmp_path / "ds" / "images" / "img00017.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00 truncated" * 20)
    argv = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--out", str(tmp_path / "run"),
            "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--concurrency", "8"]
    with SimThread(SimConfig(answer_key=key)) as sim:
        first = main([*argv, "--base-url", sim.url])
        after_first = sim.counters.snapshot()["requests"]
        second = main([*argv, "--base-url", sim.url])
        after_second = sim.counters.snapshot()["requests"]
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(records) == n and len({r["query_id"] for r in records}) == n
    bad = [r for r in records if r["error"] is not None]
    assert [r["query_id"] for r in bad] == ["q00017"] and "img00017.png" in bad[0]["error_message"]
    assert bad[0]["error"] == "data"  # the data's fault, not the model's (issue 31 item 13)
    assert sum(bool(r["correct"]) for r in records) == n - 1
    assert first == 2 and second == 2  # incomplete, and said so; the re-run cannot fix a bad file
    assert after_first == n - 1 and after_second == after_first  # nothing paid twice
