"""`evalkit sim --replay FILE` takes another harness's answers by question id (issue 35 item 12): a JSON
object id -> raw answer, or JSON Lines {"id", "answer"}; ids are evalkit's query ids (the item id where
an item is asked once, `item|variant` otherwise). The answers are served through the whole pipeline and
scored as evalkit scores any model; RGB-Th-Bench's real recorded outputs of one model score what the file
itself says (skipped where the shared data is absent)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from rgbth_common import recorded_replies, replay_replies

from evalkit.cli import build_parser, main, sim_config
from evalkit.engine.evaluate import run
from evalkit.sim.answers_file import is_records, match_answers, read_answers
from evalkit.sim.from_bench import queries_for
from evalkit.sim.server import SimThread


def _sim(*argv: str, say=None):
    args = ["sim", *argv]
    return SimThread(sim_config(build_parser(args).parse_args(args), say))


def test_answers_file_shapes(tmp_path):
    obj, lines, records = tmp_path / "a.json", tmp_path / "a.jsonl", tmp_path / "records.jsonl"
    obj.write_text(json.dumps({"q1": "B", "7": " No", "q3": None}, indent=2), encoding="utf-8")
    lines.write_text('{"id": "q1", "answer": "A", "model": "x"}\n\n{"id": 7, "answer": " No"}\n'
                     '{"id": "q1", "answer": "B"}\n{"id": "q3", "answer": null}\n', encoding="utf-8")
    records.write_text(json.dumps({"query_id": "q1", "response": "B", "prompt": "?"}) + "\n", encoding="utf-8")
    assert read_answers(obj) == read_answers(lines) == {"q1": "B", "7": " No"}  # null: no answer; last line wins
    assert (is_records(obj), is_records(lines), is_records(records)) == (False, False, True)
    bad = {"[1, 2]": "a JSON list; expected an object id -> answer",
           '{"id": "q1", "answer": "A"}\n{"id": "q2"}\n': ':2: expected {"id": ..., "answer": ...}',
           '{"q1": 3}': "the answer of 'q1' is int, not text (or null for none)",
           "q1\tA\n": "not JSON (line 1: Expecting value)"}
    for i, (text, said) in enumerate(bad.items()):
        path = tmp_path / f"bad{i}.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=None) as e:
            read_answers(path)
        assert str(e.value).startswith(f"--replay {path}") and said in str(e.value), text


def test_ids_map_to_queries_and_mismatches_are_said():
    plain, circular = queries_for("mcq", {}), queries_for("mcq", {"circular": True})
    matched = match_answers(plain, {"0": "A", "1": "B", "nope": "C"}, "mcq")
    assert matched.replies == {"0": "A", "1": "B"} and matched.unknown == ["nope"] and matched.unanswered == 22
    assert matched.note("mcq", 24) == ("replay: answers for 2 of the 24 questions of mcq (22 without one are not "
                                       "in the answer key); 1 ids match no question loaded (e.g. 'nope')")
    assert match_answers(circular, {"0|s1": "C"}, "mcq").replies == {"0|s1": "C"}
    with pytest.raises(ValueError, match=r"'0' is an item of mcq asked as 4 queries \(0\|s0, 0\|s1, 0\|s2, 0\|s3\): "
                                         "key each answer by its query id"):
        match_answers(circular, {"0": "A"}, "mcq")
    with pytest.raises(ValueError, match=r"none of the 2 ids is a question of mcq \(e.g. 'a', 'b'; its ids look like "
                                         r"'0', '1'\)"):
        match_answers(plain, {"a": "A", "b": "B"}, "mcq")


def test_bad_replay_flags_are_one_line(tmp_path, capsys):
    path = tmp_path / "answers.json"
    path.write_text('{"0": "A"}', encoding="utf-8")
    assert main(["sim", "--replay", str(path), "--port", "0"]) == 2
    assert main(["sim", "--answer-key", str(tmp_path / "gone.json"), "--port", "0"]) == 2
    assert main(["sim", "--fault-rate", "0.1", "--fault-kinds", "boom", "--port", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"evalkit: error: --replay {path} holds answers by question id: name their benchmark with --bench (and its "
        "--data and options, as for the run)",
        f"evalkit: error: --answer-key {tmp_path / 'gone.json'}: cannot be read (No such file or directory)",
        "evalkit: error: unknown fault kind(s) boom; expected some of 429, 500, 503, hang, drop, malformed, empty, "
        "400, refusal"]


def test_a_harness_answers_are_served_and_scored(tmp_path, no_plots):
    """The bundled mcq sample: half the answers right, in other words than a letter; the run's responses are the
    file's, and its accuracy is the file's own."""
    queries = queries_for("mcq", {})
    answers = {q.id: (f"The answer is ({q.gold})." if i % 2 else f"({sorted(set(q.options) - {q.gold})[0]})")
               for i, q in enumerate(queries)}
    path = tmp_path / "harness.jsonl"
    path.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()), encoding="utf-8")
    said: list[str] = []
    with _sim("--bench", "mcq", "--replay", str(path), say=said.append) as sim:
        res = run("mcq", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "run"), no_cache=True, progress=False)
    assert said == ["replay: answers for 24 of the 24 questions of mcq"]
    assert {r.query_id: r.response for r in res.records} == answers
    direct = 100 * sum(a.startswith("The answer is") for a in answers.values()) / len(answers)
    assert res.summary["counts"]["correct"] == 12 and res.summary["headline"]["value"] == pytest.approx(direct)
    # the run's own records.jsonl replays too, and with --bench its answers come first (--bench replaced them)
    argv = ["sim", "--bench", "mcq", "--replay", str(res.out_dir / "records.jsonl")]
    key = sim_config(build_parser(argv).parse_args(argv)).answer_key
    assert len(key) == 48 and sorted(e.reply for e in key.entries[:24]) == sorted(answers.values())
    assert all(e.reply is None for e in key.entries[24:])


SKILL = "Scene Understanding"
MODEL = "gemini-2.5-pro"


def test_rgbth_recorded_outputs_replayed_by_id(shared_data, tmp_path, no_plots):
    """One model's real raw answers to one skill in the first six scenes (`--limit 24`: each scene asks the skill
    four times), keyed by evalkit's ids, replayed end to end: QAcc and SAcc equal those computed from the
    file's own `is_correct`."""
    data, flags = shared_data / "rgb-th-bench", {"skills": SKILL, "limit": 24, "max_side": 256}
    queries = queries_for("rgb-th-bench", {"data": str(data), **flags})
    scenes = {q.meta["scene"] for q in queries}
    rows = [r for p in sorted((shared_data / "rgb-th-bench-outputs").glob("*.json"))
            for r in json.loads(p.read_text(encoding="utf-8")) if r["model"] == MODEL and r["skill"] == SKILL
            and "/".join(r["file"].split("\\")[-3:-1]) in scenes]
    path = tmp_path / "gemini.json"
    path.write_text(json.dumps(replay_replies(queries, recorded_replies(rows))), encoding="utf-8")
    with _sim("--bench", "rgb-th-bench", "--data", str(data), "--skills", SKILL, "--limit", "24", "--max-side", "256",
              "--replay", str(path)) as sim:
        res = run("rgb-th-bench", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "run"),
                  no_cache=True, concurrency=32, progress=False, **flags)
    by_scene: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        by_scene[r["file"]].append(bool(r["is_correct"]))
    qacc = 100 * sum(ok for oks in by_scene.values() for ok in oks) / len(rows)
    sacc = 100 * sum(all(oks) for oks in by_scene.values()) / len(by_scene)
    got = res.summary["metrics"]["per_skill"][SKILL]
    assert res.summary["n_queries"] == len(rows) == 24 and len(by_scene) == 6 and res.summary["counts"]["errors"] == 0
    assert (got["QAcc"], got["SAcc"]) == pytest.approx((qacc, sacc))
    assert 0 < sacc < 100
