"""A damaged records.jsonl line costs that line, never the run directory: `run`, `report` and `compare`
skip it, say which lines they skipped, and the next rewrite keeps them in records.damaged.jsonl.

evalkit 0.1.0 read records.jsonl as text in one go: a line torn inside a multi-byte character, an
invalid byte mid-file, `"variant": null` or records.jsonl being a directory bricked the run
directory (a traceback on every re-run, report and compare)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 20
# 1-based line numbers after damage(): q00004 torn and q00005 glued to it, then q00009, q00011, q00013, q00016
DAMAGED_LINES = (5, 9, 11, 13, 16)


def french_mcq(folder: Path) -> Path:
    """make_mcq_jsonl's set, with questions that hold multi-byte characters."""
    data = make_mcq_jsonl(folder, N, seed=41)
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    for row in rows:
        row["question"] = f"Quelle couleur domine l'image n°{row['id'][1:]} ? (réponse écrite)"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return data


def damage(records: Path) -> list[bytes]:
    """Five kinds of damage (a records.jsonl in query order); returns the damaged lines as they now stand."""
    lines = records.read_bytes().split(b"\n")[:-1]
    by_id = {json.loads(x)["query_id"]: i for i, x in enumerate(lines)}
    torn = lines[by_id["q00004"]]
    cut = torn.index("é".encode()) + 1  # inside the two bytes of é
    lines[by_id["q00004"]] = torn[:cut] + lines[by_id["q00005"]]  # a torn write, then the next append glued on
    del lines[by_id["q00005"]]
    by_id = {json.loads(x)["query_id"]: i for i, x in enumerate(lines) if i != by_id["q00004"]}
    lines[by_id["q00009"]] = lines[by_id["q00009"]].replace("réponse".encode(), b"r\xffponse")  # an invalid byte
    for qid, field, value in (("q00011", "variant", None), ("q00013", "usage", "lots")):
        row = json.loads(lines[by_id[qid]])
        row[field] = value
        lines[by_id[qid]] = json.dumps(row, ensure_ascii=False).encode()
    row = json.loads(lines[by_id["q00016"]])
    del row["query_id"]
    lines[by_id["q00016"]] = json.dumps(row, ensure_ascii=False).encode()
    records.write_bytes(b"".join(x + b"\n" for x in lines))
    return [lines[i - 1] for i in DAMAGED_LINES]


def valid_ids(records: Path) -> list[str]:
    return sorted(json.loads(x.decode("utf-8"))["query_id"] for x in records.read_bytes().splitlines())


@pytest.fixture
def finished(tmp_path):
    data = french_mcq(tmp_path / "ds")
    sim = SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))).start()
    argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
            "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    try:
        first = run_main([*argv, "--out", str(tmp_path / "run")])
        assert first.returncode == 0, first.stderr
        yield sim, argv, tmp_path / "run"
    finally:
        sim.close()


def test_run_skips_damaged_lines_keeps_them_and_asks_their_queries_again(finished):
    sim, argv, out = finished
    broken = damage(out / "records.jsonl")
    again = run_main([*argv, "--out", str(out)])
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert ("records.jsonl: 5 damaged lines skipped (lines 5, 9, 11, 13, 16), kept in records.damaged.jsonl; "
            "their queries are asked again") in again.stderr
    assert (out / "records.damaged.jsonl").read_bytes() == b"".join(x + b"\n" for x in broken)
    assert valid_ids(out / "records.jsonl") == [f"q{i:05d}" for i in range(N)]
    assert sim.counters.snapshot()["requests"] == N  # asked again from the cache: nothing paid twice
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["metrics"]["accuracy"] == 100.0


def test_report_skips_damaged_lines_and_keeps_them(finished):
    sim, argv, out = finished
    broken = damage(out / "records.jsonl")
    report = run_main(["report", str(out)])
    assert report.returncode == 1, report.stderr  # six queries have no record now: incomplete, resumable
    assert "Traceback" not in report.stderr
    assert "records.jsonl: 5 damaged lines skipped (lines 5, 9, 11, 13, 16), kept in records.damaged.jsonl" \
        in report.stderr
    assert (out / "records.damaged.jsonl").read_bytes() == b"".join(x + b"\n" for x in broken)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["missing"] == 6 and summary["counts"]["correct"] == N - 6
    assert len(valid_ids(out / "records.jsonl")) == N - 6
    resumed = run_main([*argv, "--out", str(out)])  # and the run completes them, from the cache
    assert resumed.returncode == 0, resumed.stderr
    assert valid_ids(out / "records.jsonl") == [f"q{i:05d}" for i in range(N)]
    assert sim.counters.snapshot()["requests"] == N


def test_compare_skips_damaged_lines_and_says_so(finished, tmp_path):
    sim, argv, out = finished
    other = tmp_path / "other"
    assert run_main([*argv, "--out", str(other)]).returncode == 0
    damage(other / "records.jsonl")
    before = (other / "records.jsonl").read_bytes()
    compared = run_main(["compare", str(out), str(other), "--out", str(tmp_path / "cmp"), "--n-boot", "50"])
    assert compared.returncode == 0, compared.stderr
    assert "Traceback" not in compared.stderr
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "other: records.jsonl: 5 damaged lines skipped (lines 5, 9, 11, 13, 16)" in report
    assert (other / "records.jsonl").read_bytes() == before  # compare only reads
    assert "has no record of 6 queries" in report


@pytest.mark.parametrize("command", ["run", "report", "compare"])
def test_records_jsonl_being_a_directory_is_one_line_naming_it(finished, tmp_path, command):
    sim, argv, out = finished
    (out / "records.jsonl").unlink()
    (out / "records.jsonl").mkdir()
    args = {"run": [*argv, "--out", str(out)], "report": ["report", str(out)],
            "compare": ["compare", str(out), str(out), "--out", str(tmp_path / "cmp")]}[command]
    result = run_main(args)
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert message.startswith(f"evalkit: error: {out / 'records.jsonl'}: cannot be read")
    assert (out / "records.jsonl").is_dir()
