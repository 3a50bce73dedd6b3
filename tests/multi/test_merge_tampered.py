"""`evalkit merge` refuses tampered shards (issue 44 item 8): a second, different answer to the same request
of a query (0.3 merged whichever line came last) and a record of a query that is not in the run's data
(0.3 carried it into the merged records.jsonl) are each one line naming the shard's file, the line and the
query, exit 2, nothing written; the same answer twice (an honest overlap) still merges."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_under_test import checkout_under_test, run_cli

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """mcq's bundled demo set asked in two shards of a simulated model; the run directories."""
    root = tmp_path_factory.mktemp("tamper")
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {}))) as sim:
        dirs = []
        for k in ("1/2", "2/2"):
            out = root / f"shard-{k[0]}"
            said = run_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--shard", k,
                            "--out", str(out), "--no-cache", "--no-progress"])
            assert said.returncode == 0, said.stderr[-2000:]
            dirs.append(out)
    return dirs


def _copies(shards: list[Path], where: Path) -> list[Path]:
    return [Path(shutil.copytree(s, where / s.name)) for s in shards]


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "records.jsonl").read_text(encoding="utf-8").splitlines()]


def _append(run: Path, record: dict) -> int:
    """Append one record line; its line number."""
    path = run / "records.jsonl"
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    return len(path.read_text(encoding="utf-8").splitlines())


def _merge(dirs: list[Path], out: Path):
    return run_cli(["merge", *map(str, dirs), "--out", str(out), "--no-plots"])


def _refused(said, out: Path) -> str:
    lines = [line for line in said.stderr.splitlines() if line.strip()]
    assert said.returncode == 2, said.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in said.stderr, said.stderr[-2000:]
    assert not out.exists()  # nothing written
    return lines[0]


def test_a_second_different_answer_to_the_same_request_is_refused_naming_file_line_and_query(shards, tmp_path):
    dirs = _copies(shards, tmp_path)
    victim = _lines(dirs[0])[2]
    forged = {**victim, "response": "B" if victim["gold"] != "B" else "C"}  # the same request, another answer
    line = _append(dirs[0], forged)
    out = tmp_path / "merged"
    said = _refused(_merge(dirs, out), out)
    assert f"{dirs[0] / 'records.jsonl'}: line {line}: query '{victim['query_id']}' answered 'B" in said or \
        f"{dirs[0] / 'records.jsonl'}: line {line}: query '{victim['query_id']}' answered 'C" in said, said
    assert "line 3 answered" in said and "tampered" in said

    across = _copies(shards, tmp_path / "across")  # the forged answer in the other shard's file
    other = _lines(across[0])[0]
    line = _append(across[1], {**other, "response": other["response"] + " (edited)"})
    out = tmp_path / "merged-across"
    said = _refused(_merge(across, out), out)
    assert said.startswith(f"evalkit: error: {across[1] / 'records.jsonl'}: line {line}: query "
                           f"'{other['query_id']}' answered") and f"{across[0] / 'records.jsonl'} line 1" in said


def test_a_record_of_a_query_not_in_the_data_is_refused(shards, tmp_path):
    dirs = _copies(shards, tmp_path)
    line = _append(dirs[1], {**_lines(dirs[1])[0], "query_id": "planted-999", "item_id": "planted-999",
                             "base_id": "planted-999"})
    out = tmp_path / "merged"
    said = _refused(_merge(dirs, out), out)
    assert said == (f"evalkit: error: {dirs[1] / 'records.jsonl'}: line {line}: query 'planted-999' is not a query "
                    "of this run's data: a tampered or foreign shard, refused (nothing written)")


def test_the_same_answer_twice_still_merges_as_before(shards, tmp_path):
    clean = tmp_path / "clean"
    assert _merge(shards, clean).returncode == 0
    dirs = _copies(shards, tmp_path)
    _append(dirs[0], _lines(dirs[0])[1])  # a line written twice: the same request, the same answer
    out = tmp_path / "merged"
    said = _merge(dirs, out)
    assert said.returncode == 0, said.stderr[-2000:]
    merged, expected = _lines(out), _lines(clean)
    assert len(merged) == 24 and [r["query_id"] for r in merged] == [r["query_id"] for r in expected]
    assert [r["response"] for r in merged] == [r["response"] for r in expected]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["metrics"] == json.loads((clean / "summary.json").read_text())["metrics"]


def test_a_shard_whose_config_asks_a_billion_repeats_is_refused_before_anything_is_expanded(shards, tmp_path):
    dirs = _copies(shards, tmp_path)
    config_path = dirs[0] / "config.json"
    saved = json.loads(config_path.read_text())
    saved["config"]["repeats"] = 1_000_000_000  # not in the identity: the shards still look like one run's
    config_path.write_text(json.dumps(saved))
    out = tmp_path / "merged"

    def cap() -> None:  # an evalkit that expands them fails here instead of taking the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    main = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
            "from evalkit.cli import main; sys.exit(main(sys.argv[1:]))")
    said = subprocess.run([sys.executable, "-c", main, "merge", *map(str, dirs), "--out", str(out), "--no-plots"],
                          capture_output=True, text=True, timeout=120, preexec_fn=cap,
                          env={**os.environ, "PYTHONPATH": str(checkout_under_test())})
    assert _refused(said, out) == (f"evalkit: error: {config_path}: repeats 1000000000 is not a count from 1 to "
                                   "1,000 (--repeats): not as evalkit wrote it")
