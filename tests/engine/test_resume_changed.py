"""A resumed run never grades an old answer against a changed question, and never deletes a record
because an input is missing, skipped or empty.

evalkit 0.1.0 keyed resume on query ids alone: after a data set was rewritten with the same ids,
a re-run sent 0 requests and graded the old answers against the new gold; emptying the data file
deleted every record (exit 0); an image missing under --skip-missing deleted its records and the run
reported complete. Each test drives the command line against the simulator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_under_test import run_main
from synthetic_data import REPO, draw_image, make_mcq_jsonl

from evalkit.sim.answerkey import AnswerKey
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

CHANGED = ("q00003", "q00007", "q00011", "q00012", "q00019")


def rewrite_items(data: Path, ids: tuple[str, ...]) -> dict[str, str]:
    """The same ids with a new question, a new picture and a new gold answer; returns the new golds."""
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    golds = {}
    for row in rows:
        if row["id"] in ids:
            row["question"] = f"Rewritten: which shape is largest in picture {row['id']}?"
            draw_image(50_000 + int(row["id"][1:])).save(data.parent / row["image"])
            row["answer"] = "ABCD"[("ABCD".index(row["answer"]) + 1) % 4]
            golds[row["id"]] = row["answer"]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return golds


def learn(key: AnswerKey, bench: str, options: dict) -> None:
    """The running simulator also knows the answers to the data as it is now."""
    for entry in answer_key_for(bench, options).entries:
        key.add(entry)


def requests(sim: SimThread) -> int:
    return sim.counters.snapshot()["requests"]


def records_of(run: Path) -> dict[str, dict]:
    return {r["query_id"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())}


def summary_of(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_changed_questions_under_the_same_ids_are_refused_then_reasked_exactly(tmp_path):
    n = 20
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=31)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
        assert run_main(argv).returncode == 0 and requests(sim) == n
        identity_before = json.loads((out / "config.json").read_text())["identity"]
        golds = rewrite_items(data, CHANGED)
        learn(key, "mcq", {"data": str(data)})

        refused = run_main(argv)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
        assert "the data file and the images changed" in refused.stderr and "--reask-changed" in refused.stderr
        assert requests(sim) == n and len(records_of(out)) == n  # nothing asked, nothing touched

        reasked = run_main([*argv, "--reask-changed"])
        assert reasked.returncode == 0, reasked.stderr
        assert requests(sim) == n + len(CHANGED)  # exactly the changed queries
        assert "5 answered queries were asked differently" in reasked.stderr
        again = run_main(argv)  # the directory now holds this data: a plain re-run is free
        assert again.returncode == 0, again.stderr
        assert requests(sim) == n + len(CHANGED)
    records = records_of(out)
    assert len(records) == n
    for qid in CHANGED:
        assert records[qid]["gold"] == golds[qid] and "Rewritten: which shape" in records[qid]["prompt"]
        assert records[qid]["correct"] is True
    summary = summary_of(out)
    assert summary["complete"] and summary["metrics"]["accuracy"] == 100.0
    assert summary["not_in_run"] == 0 and summary["unscored_ids"] == []
    saved = json.loads((out / "config.json").read_text())
    assert saved["identity"]["data_sha256"] != identity_before["data_sha256"]
    assert {k: v for k, v in saved["identity"].items() if k != "data_sha256"} == \
        {k: v for k, v in identity_before.items() if k != "data_sha256"}


def test_default_run_directory_follows_the_data(tmp_path):
    n = 20
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=32)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
        assert run_main(argv, cwd=tmp_path).returncode == 0
        [old] = (tmp_path / "runs").iterdir()
        old_lines = (old / "records.jsonl").read_bytes()
        rewrite_items(data, CHANGED)
        learn(key, "mcq", {"data": str(data)})
        second = run_main(argv, cwd=tmp_path)
        assert second.returncode == 0, second.stderr
        assert requests(sim) == n + len(CHANGED)  # the unchanged questions come from the cache
    new = [p for p in (tmp_path / "runs").iterdir() if p != old]
    assert len(new) == 1  # changed data is another run
    assert (old / "records.jsonl").read_bytes() == old_lines
    assert summary_of(new[0])["metrics"]["accuracy"] == 100.0 and summary_of(new[0])["complete"]


def test_a_corrected_gold_answer_regrades_without_asking(tmp_path):
    n = 12
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=33)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--reask-changed"]
        assert run_main(argv).returncode == 0
        rows = [json.loads(x) for x in data.read_text().splitlines()]
        rows[2]["answer"] = "ABCD"[("ABCD".index(rows[2]["answer"]) + 1) % 4]  # the gold was wrong
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        regraded = run_main(argv)
        assert regraded.returncode == 0, regraded.stderr
        assert requests(sim) == n  # the question asked is the same: its answer stands
    record = records_of(out)["q00002"]
    assert record["gold"] == rows[2]["answer"] and record["correct"] is False
    assert summary_of(out)["counts"]["correct"] == n - 1


def test_an_emptied_data_file_deletes_no_record(tmp_path):
    n = 12
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=34)
    original = data.read_bytes()
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
        assert run_main(argv).returncode == 0
        lines = (out / "records.jsonl").read_bytes()
        data.write_bytes(b"")
        for extra in ([], ["--reask-changed"]):  # an evaluation of nothing is refused either way
            refused = run_main([*argv, *extra])
            assert refused.returncode == 2 and "nothing to evaluate: it holds no items" in refused.stderr
            assert (out / "records.jsonl").read_bytes() == lines  # kept, line for line
        data.write_bytes(original)
        back = run_main([*argv, "--reask-changed"])
        assert back.returncode == 0, back.stderr
        assert requests(sim) == n  # every answer was still there
    summary = summary_of(out)
    assert summary["not_in_run"] == 0 and summary["complete"] and summary["metrics"]["accuracy"] == 100.0


def test_an_image_missing_under_skip_missing_deletes_no_record(tmp_path):
    data = tmp_path / "if-bench"
    shutil.copytree(REPO / "datasets" / "if-bench", data)
    options = {"data": str(data), "lang": "en", "skip_missing": True}
    key = answer_key_for("if-bench", options)
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "if-bench", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--lang", "en", "--skip-missing", "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
                "--no-progress"]
        assert run_main(argv).returncode == 0
        asked, before = requests(sim), records_of(out)
        assert len(before) == 80
        image = data / "infrared_imgs" / "ir_003.png"
        image.rename(tmp_path / "away.png")  # gone for a while

        refused = run_main(argv)
        assert refused.returncode == 2 and "the images changed" in refused.stderr
        assert records_of(out) == before
        skipped = run_main([*argv, "--reask-changed"])
        assert skipped.returncode == 0, skipped.stderr
        assert records_of(out) == before  # the skipped items' records are kept
        summary = summary_of(out)
        assert summary["not_in_run"] == 8 and summary["n_queries"] == 72 and summary["complete"]
        assert len({before[qid]["item_id"] for qid in summary["unscored_ids"]}) == 2  # two items, 4 shifts each
        assert "8 records of queries not in this run" in (out / "report.md").read_text()

        (tmp_path / "away.png").rename(image)
        back = run_main([*argv, "--reask-changed"])
        assert back.returncode == 0, back.stderr
        assert requests(sim) == asked  # nothing asked twice
    summary = summary_of(out)
    assert summary["n_queries"] == 80 and summary["not_in_run"] == 0 and summary["missing"] == 0
    assert records_of(out) == before



def test_a_failed_reask_keeps_the_old_answer_until_a_new_one_arrives(tmp_path):
    n = 10
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=35)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "run"
    picture = tmp_path / "ds" / "images" / "img00003.png"
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--reask-changed"]
        assert run_main(argv).returncode == 0
        old_line = next(x for x in (out / "records.jsonl").read_text().splitlines() if '"q00003"' in x)
        picture.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00 truncated" * 20)  # replaced by a broken file
        failed = run_main(argv)
        assert failed.returncode == 2, failed.stderr  # incomplete: the new picture cannot be read (data error)
        assert requests(sim) == n
        assert old_line in (out / "records.jsonl").read_text().splitlines()  # the old answer is kept
        summary = summary_of(out)
        assert summary["counts"]["data_errors"] == 1 and summary["unscored_ids"] == ["q00003"]
        assert summary["counts"]["correct"] == n - 1  # and not scored

        draw_image(77_777).save(picture)  # a readable new picture
        learn(key, "mcq", {"data": str(data)})
        fixed = run_main(argv)
        assert fixed.returncode == 0, fixed.stderr
        assert requests(sim) == n + 1
    record = records_of(out)["q00003"]
    assert record["image_fps"] != json.loads(old_line)["image_fps"]  # the answer to the new picture
    assert record["correct"] is True and record["error"] is None
    assert summary_of(out)["unscored_ids"] == [] and summary_of(out)["complete"]
