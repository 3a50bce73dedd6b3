"""Old answers are never graded against changed data unseen.

Swapping options A and B and the gold letter in the data, then `evalkit report RUN`, graded the old
answers against the new gold (accuracy 100 -> 50, exit 0, no warning) and marked the run
`requests: evalkit-0.1 (not official)`: the report never checked the data, and resume's 0.1 rule
(an answer whose prompt holds today's question is 0.1.0's, kept) took today's answers for 0.1.0's.
`evalkit run` did the same when an image was replaced by one of the same byte size with its mtime
set back: the file-hash memo, keyed by path, size and mtime, gave the old hash, so the data
fingerprint (the run's identity) did not move.

Now `report` refuses changed data as `run` does (exit 2, one line naming what changed and saying
`--reask-changed`), the memo also keys on inode and ctime (setting an mtime back changes the ctime),
and the 0.1 rule applies only to answers 0.1.0 wrote (marked `asked_with: evalkit-0.1` in
records.jsonl when first seen in a directory 0.1.0 wrote).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from cli_under_test import run_main
from synthetic_data import draw_image, make_mcq_jsonl

from evalkit.benchmarks.prepare import prepare
from evalkit.core.record import Record
from evalkit.engine.resume import OLDER_REQUESTS, V010, may_hold_unmarked_v010, sort_records
from evalkit.rundir.identity import FileHashes
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def _requests(sim: SimThread) -> int:
    return sim.counters.snapshot()["requests"]


def _learn(sim_key, data: Path) -> None:  # noqa: ANN001
    """The running simulator also knows the answers to the data as it is now."""
    for entry in answer_key_for("mcq", {"data": str(data)}).entries:
        sim_key.add(entry)


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def _swap_a_and_b(data: Path) -> int:
    """Options A and B swapped in every row, and the gold letter with them; returns how many golds moved."""
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    moved = 0
    for row in rows:
        row["options"]["A"], row["options"]["B"] = row["options"]["B"], row["options"]["A"]
        if row["answer"] in "AB":
            row["answer"] = "B" if row["answer"] == "A" else "A"
            moved += 1
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return moved


def test_report_refuses_swapped_options_and_gold(tmp_path):
    n = 8
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=49)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
        assert run_main(argv).returncode == 0 and _requests(sim) == n
        assert _summary(out)["metrics"]["accuracy"] == 100.0 and "requests" not in _summary(out)
        before = {name: (out / name).read_bytes() for name in ("summary.json", "records.jsonl", "report.md")}
        assert _swap_a_and_b(data) == 4  # (seed 49: half the golds were A or B: the old answers score 50)

        refused = run_main(["report", str(out), "--cache-dir", str(tmp_path / "cache")])
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr
        [line] = refused.stderr.strip().splitlines()
        assert line == (f"evalkit: error: run directory {out} holds answers to other data (the data file changed "
                        f"since); re-run the run's command with --out {out} --reask-changed to ask the changed "
                        "queries again (a corrected gold answer is re-graded without asking), then report it")
        assert {name: (out / name).read_bytes() for name in before} == before  # nothing rewritten

        _learn(key, data)
        reasked = run_main([*argv, "--reask-changed"])  # as the line says
        assert reasked.returncode == 0, reasked.stderr
        assert _requests(sim) == 2 * n  # every prompt changed (its options did): each asked again
        assert run_main(["report", str(out), "--cache-dir", str(tmp_path / "cache")]).returncode == 0
    summary = _summary(out)
    assert summary["metrics"]["accuracy"] == 100.0 and summary["complete"]
    assert "requests" not in summary and "older_requests" not in summary  # today's answers, today's requests


def _same_size_other_picture(path: Path) -> None:
    """Another picture in the same number of bytes (PNG ignores what follows its end), mtime set back."""
    st = path.stat()
    for seed in range(90_000, 90_100):
        buf = io.BytesIO()
        draw_image(seed).save(buf, format="PNG")
        if len(buf.getvalue()) <= st.st_size:
            break
    raw = buf.getvalue()
    path.write_bytes(raw + b"\0" * (st.st_size - len(raw)))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_run_notices_an_image_replaced_in_the_same_size_with_its_mtime_set_back(tmp_path):
    n = 4
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=42)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
        assert run_main(argv).returncode == 0 and _requests(sim) == n
        old = {r["query_id"]: r for r in map(json.loads, (out / "records.jsonl").read_text().splitlines())}
        _same_size_other_picture(data.parent / "images" / "img00002.png")

        refused = run_main(argv)  # as for any changed data under an explicit --out
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "holds answers to other data (the images changed since)" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and _requests(sim) == n

        _learn(key, data)
        reasked = run_main([*argv, "--reask-changed"])
        assert reasked.returncode == 0, reasked.stderr
        assert _requests(sim) == n + 1  # exactly the query of the replaced picture
        assert "1 answered queries were asked differently" in reasked.stderr
        again = run_main(argv)  # paid-for answers are sacred: the complete run sends nothing
        assert again.returncode == 0, again.stderr
        assert _requests(sim) == n + 1
    new = {r["query_id"]: r for r in map(json.loads, (out / "records.jsonl").read_text().splitlines())}
    assert new["q00002"]["image_fps"] != old["q00002"]["image_fps"]
    assert {q: r for q, r in new.items() if q != "q00002"} == {q: r for q, r in old.items() if q != "q00002"}
    summary = _summary(out)
    assert summary["complete"] and "requests" not in summary


def test_the_file_hash_memo_sees_a_same_size_rewrite_and_rereads_nothing_unchanged(tmp_path):
    files = []
    for i in range(3):
        draw_image(i).save(tmp_path / f"{i}.png")
        files.append(str(tmp_path / f"{i}.png"))
    memo = tmp_path / "file-hashes.json"
    first = FileHashes(memo)
    shas = [first.sha256(f) for f in files]
    first.save()
    again = FileHashes(memo)
    assert [again.sha256(f) for f in files] == shas and again.reads == 0  # the common path: no read

    _same_size_other_picture(Path(files[1]))
    seen = FileHashes(memo)
    now = [seen.sha256(f) for f in files]
    assert now[1] != shas[1] and (now[0], now[2]) == (shas[0], shas[2]) and seen.reads == 1

    old_form = {p: v[:3] for p, v in json.loads(memo.read_text()).items()}  # [size, mtime_ns, sha]: before
    memo.write_text(json.dumps(old_form))
    upgraded = FileHashes(memo)  # such an entry is read once more (the same hash: no identity moves) ...
    assert [upgraded.sha256(f) for f in files] == [shas[0], now[1], shas[2]] and upgraded.reads == 3
    upgraded.save()
    kept = FileHashes(memo)  # ... and kept in today's form
    assert [kept.sha256(f) for f in files] == [shas[0], now[1], shas[2]] and kept.reads == 0


# ---- the 0.1 rule: 0.1.0's answers only ---------------------------------------------------------


def _changed(tmp_path: Path, *, asked_with: str | None = None):  # noqa: ANN202
    """One mcq query and a record of it whose request key is not today's but whose prompt holds its
    question: what 0.1.0's answer looks like, and what today's answer to a changed request looks like."""
    data = make_mcq_jsonl(tmp_path / "ds", 1, seed=43)
    [query] = prepare("mcq", {"data": str(data)}).queries
    record = Record(query_id=query.id, item_id=query.item_id, base_id=query.base_id, variant={}, model="vllm/m",
                    request_key="asked-otherwise", response="A", gold="C", prompt=query.prompt_text(),
                    asked_with=asked_with)
    by_id = {query.id: query}
    return by_id, sort_records(by_id, {query.id: record}, lambda q: ["today"])


def test_todays_answer_to_a_changed_request_is_never_taken_for_010s(tmp_path):
    by_id, resume = _changed(tmp_path)
    assert list(resume.changed) == list(by_id)
    assert resume.mark_older(by_id) == 0 and resume.keep_older(by_id) == {}
    assert list(resume.changed) == list(by_id) and not resume.current  # asked again, not graded


def test_an_010_answer_gets_the_010_treatment_and_keeps_its_mark(tmp_path):
    by_id, resume = _changed(tmp_path)  # unmarked, in a directory 0.1.0 wrote
    [qid] = by_id
    assert resume.mark_older(by_id, v010_dir=True) == 1
    older = resume.keep_older(by_id)
    assert list(older) == [qid] and resume.current[qid].asked_with == V010
    assert resume.current[qid].gold == by_id[qid].gold  # graded against today's gold
    assert Record.from_dict(resume.current[qid].to_dict()).asked_with == V010  # the line keeps the mark

    by_id, resume = _changed(tmp_path / "marked", asked_with=V010)  # marked: anywhere, from then on
    assert resume.mark_older(by_id) == 0 and list(resume.keep_older(by_id)) == list(by_id)


def test_which_directories_may_hold_unmarked_010_answers(tmp_path):
    today = Record(query_id="q", item_id="q", base_id="q", variant={}, model="m", request_key="k", response="A",
                   gold="A")
    marked = Record(**{**today.__dict__, "asked_with": V010})
    assert may_hold_unmarked_v010(tmp_path, v010_config=True, records=[today])  # 0.1.0's config.json
    assert not may_hold_unmarked_v010(tmp_path, v010_config=False, records=[today])  # no summary: today's
    (tmp_path / "summary.json").write_text(json.dumps({"requests": OLDER_REQUESTS}))
    assert may_hold_unmarked_v010(tmp_path, v010_config=False, records=[today])  # kept by an earlier evalkit
    assert not may_hold_unmarked_v010(tmp_path, v010_config=False, records=[today, marked])  # marked since
    (tmp_path / "summary.json").write_text(json.dumps({"metrics": {}}))
    assert not may_hold_unmarked_v010(tmp_path, v010_config=False, records=[today])
