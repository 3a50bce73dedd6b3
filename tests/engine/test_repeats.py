"""`--repeats N`: every query asked N times, repeat 0 as it always was, and the scores over repeats.

The command line is driven against a simulated model that samples (`SimParams.sample_rate`); the
statistics in summary.json are recomputed here, independently, from records.jsonl."""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

import evalkit.sim.machinery.serving as sim_serving
from evalkit.ask.request_key import request_key
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.types import GenParams, Message, Query
from evalkit.engine.repeats import source_id, with_repeats
from evalkit.metrics.reliability import fit_histogram
from evalkit.metrics.repeats import (
    agreement,
    majority_answer,
    majority_vote_pct,
    mean_sd,
    pass_at_k,
    pass_at_ks,
)
from evalkit.multi.compare import compare
from evalkit.sim.args import add_sim_arguments, config_from_args
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import Sampling, SimModel, SimParams, sampling_of
from evalkit.sim.server import SimConfig, SimThread

N = 8  # questions per data set


# ---- the pure statistics --------------------------------------------------------------------


def test_mean_and_sample_sd():
    assert mean_sd([]) == (None, None)
    assert mean_sd([70.0]) == (70.0, None)
    mean, sd = mean_sd([60.0, 70.0, 80.0, 90.0])
    assert mean == 75.0 and sd == pytest.approx(math.sqrt(500 / 3))  # n - 1 in the denominator
    assert sd == pytest.approx(statistics.stdev([60.0, 70.0, 80.0, 90.0]))


def _brute_pass_at_k(outcomes: list[bool], k: int) -> float:
    """Share of the k-subsets of the samples holding at least one right answer (what pass@k estimates)."""
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 3, 3) == 1.0 and pass_at_k(4, 4, 1) == 1.0
    for n in range(1, 7):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_brute_pass_at_k(outcomes, k))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_pass_at_ks_averages_over_queries_with_enough_samples():
    groups = [[True, False, False], [False, False, False], [True, True]]  # the last misses a repeat
    out = pass_at_ks(groups, 3)
    assert out[1] == pytest.approx(100 * (1 / 3 + 0 + 1) / 3)
    assert out[2] == pytest.approx(100 * (2 / 3 + 0 + 1) / 3)
    assert out[3] == pytest.approx(100 * (1 + 0) / 2)  # only the two queries with 3 samples


def test_agreement_counts_identical_answers_and_the_modal_share():
    a = agreement([["A", "A", "A"], ["A", "B", "A"], ["A", "B", "C"], ["A"], [None, None, None]])
    assert a.queries == 4  # one answer says nothing about agreement
    assert a.all_same_pct == pytest.approx(50.0)  # AAA and three unreadable answers
    assert a.modal_share_pct == pytest.approx(100 * (1 + 2 / 3 + 1 / 3 + 1) / 4)
    assert agreement([]).to_dict() == {"queries": 0, "all_same_pct": None, "modal_share_pct": None}


def test_majority_vote_ties_go_to_the_first_answer_and_unread_answers_do_not_vote():
    assert majority_answer(["B", "A", "A", "B"]) == "B"
    assert majority_answer([None, None, "C"]) == "C"
    assert majority_answer([None, None]) is None
    groups = [[("A", True), ("B", False), ("A", True)],   # A wins: right
              [("B", False), ("A", True), ("B", False)],  # B wins: wrong
              [(None, False), (None, False), ("A", True)],  # the only vote is right
              [(None, False), (None, False), (None, False)]]  # no vote: wrong
    assert majority_vote_pct(groups) == pytest.approx(50.0)
    # the same answer judged differently: correctness is not a function of the answer (no single gold)
    assert majority_vote_pct([[("A", True), ("A", False)]]) is None
    assert majority_vote_pct([]) is None


# ---- ids, seeds and cache keys --------------------------------------------------------------


def _query(qid: str, seed: int | None = None) -> Query:
    return Query(qid, qid, qid, {}, (Message.user(f"question {qid}"),), "A", {"A": "x", "B": "y"},
                 GenParams(seed=seed))


def test_repeats_expand_with_their_own_ids_seeds_and_params():
    queries = [_query("q1", seed=7), _query("q2", seed=7)]
    assert with_repeats(queries, 1) is queries
    out = with_repeats(queries, 3)
    assert [q.id for q in out] == ["q1", "q2", "q1#r1", "q2#r1", "q1#r2", "q2#r2"]
    assert out[:2] == queries  # repeat 0 is the query itself
    assert [q.params.seed for q in out] == [7, 7, 8, 8, 9, 9]
    assert [q.params.repeat for q in out] == [0, 0, 1, 1, 2, 2]
    assert [q.params.seed for q in with_repeats([_query("q")], 2)] == [None, None]
    assert all(q.params.to_dict() == queries[0].params.to_dict() | {"seed": q.params.seed} for q in out)
    rec = Record("q1#r2", "q1", "q1", {}, "m", "k", "A", "A", repeat=2)
    assert source_id(rec) == "q1" and source_id(Record("q1#r2", "q1", "q1", {}, "m", "k", "A", "A")) == "q1#r2"


def test_batches_need_a_seed_to_tell_repeats_apart():
    with pytest.raises(EvalkitError, match="--seed"):
        with_repeats([_query("q")], 2, batch_provider="openai")
    with pytest.raises(EvalkitError, match="anthropic/ takes no seed"):
        with_repeats([_query("q", seed=1)], 2, batch_provider="anthropic")
    assert len(with_repeats([_query("q", seed=1)], 2, batch_provider="openai")) == 2


def test_repeat_zero_keeps_the_key_of_0_1_0_and_later_repeats_get_their_own():
    def key(params: GenParams) -> str:
        return request_key(provider="vllm", model="m", endpoint="http://h/v1", params=params,
                           messages=(Message.user("q?"),), source_hash=lambda ref: "h")

    # the payload 0.1.0 hashed, spelled out: no trace of a repeat in it
    payload = {"schema": 1, "provider": "vllm", "model": "m", "endpoint": "http://h/v1",
               "params": {"temperature": 0.7, "max_tokens": 1024, "seed": None, "stop": None, "top_p": None,
                          "extra": {}},
               "messages": [{"role": "user", "parts": [{"text": "q?"}]}]}
    old = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert key(GenParams(temperature=0.7)) == key(GenParams(temperature=0.7, repeat=0)) == old
    keys = {key(GenParams(temperature=0.7, repeat=r)) for r in range(4)}
    assert len(keys) == 4
    assert "repeat" not in GenParams(repeat=3).to_dict()  # never sent, never in config.json's generation


def test_records_carry_their_repeat_and_repeat_zero_lines_are_unchanged():
    rec = Record("q1", "q1", "q1", {}, "m", "k", "A", "A")
    assert "repeat" not in rec.to_dict()
    again = Record("q1#r2", "q1", "q1", {}, "m", "k", "A", "A", repeat=2)
    assert again.to_dict()["repeat"] == 2 and Record.from_dict(again.to_dict()) == again
    for bad in (-1, True, "2"):
        with pytest.raises(ValueError, match="repeat"):
            Record.from_dict({**again.to_dict(), "repeat": bad})


# ---- the simulated model samples ------------------------------------------------------------


def test_sampling_is_read_from_every_dialect():
    assert sampling_of({"temperature": 0.7, "seed": 3}) == Sampling(0.7, 3)
    assert sampling_of({"temperature": 1, "max_tokens": 5}) == Sampling(1.0, None)  # Anthropic: no seed
    assert sampling_of({"generationConfig": {"temperature": 0.5, "seed": 9}}) == Sampling(0.5, 9)
    assert sampling_of({"generation_config": {"seed": 2}}) == Sampling(None, 2)
    assert not Sampling(0.0, None).sampled and Sampling(0.0, 1).sampled and Sampling(0.2).sampled


def _answers(model: SimModel, sampling: Sampling | None, n: int) -> list[str | None]:
    text = "Which one?\nA. red\nB. green\nC. blue\nD. black"
    return [model.reply(text, [], sampling).answer for _ in range(n)]


def test_the_sim_samples_deterministically_by_seed_or_by_repeated_request():
    params = SimParams(sample_rate=0.5)
    greedy = _answers(SimModel(params), Sampling(0.0), 20)
    assert len(set(greedy)) == 1  # temperature 0, no seed: always the model's own answer
    assert _answers(SimModel(SimParams()), Sampling(0.9), 20) == greedy  # sample_rate 0: as before
    drawn = _answers(SimModel(params), Sampling(0.9), 40)
    assert len(set(drawn)) > 1 and 5 <= sum(a != greedy[0] for a in drawn) <= 35
    assert _answers(SimModel(params), Sampling(0.9), 40) == drawn  # k-th identical request, k-th sample
    model = SimModel(params)
    by_seed = {s: _answers(model, Sampling(0.9, s), 3) for s in range(30)}
    assert all(len(set(v)) == 1 for v in by_seed.values())  # a seed is one sample, however often asked
    assert len({v[0] for v in by_seed.values()}) > 1


def test_sample_rate_flag():
    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    assert config_from_args(parser.parse_args(["--sample-rate", "0.25"])).params.sample_rate == 0.25
    assert config_from_args(parser.parse_args([])).params.sample_rate == 0.0
    with pytest.raises(ValueError, match="sample rate"):
        config_from_args(parser.parse_args(["--sample-rate", "2"]))


# ---- the command line against a sampling simulator ------------------------------------------


def _sim(data: Path, rate: float = 0.5) -> SimThread:
    key = answer_key_for("mcq", {"data": str(data)})
    return SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.6, r=0.9, seed=5, sample_rate=rate)))


def _argv(sim: SimThread, data: Path, tmp: Path, *extra: str, out: str = "run") -> list[str]:
    return ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
            "--out", str(tmp / out), "--cache-dir", str(tmp / "cache"), "--no-progress", *extra]


def _requests(sim: SimThread) -> int:
    return sim.counters.snapshot()["requests"]


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def _ok(proc) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_repeats_send_n_times_then_nothing_then_only_the_new_repeats(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=41)
    run = tmp_path / "run"
    with _sim(data) as sim:
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8", "--repeats", "3")))
        assert _requests(sim) == 3 * N
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8", "--repeats", "3")))
        assert _requests(sim) == 3 * N  # everything is in records.jsonl
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8", "--repeats", "5")))
        assert _requests(sim) == 5 * N  # exactly the two new repeats of every query
    records = _records(run)
    assert len(records) == 5 * N and len({r["query_id"] for r in records}) == 5 * N
    for r in records:
        assert r.get("repeat", 0) == (int(r["query_id"].split("#r")[1]) if "#r" in r["query_id"] else 0)
    answers = defaultdict(list)
    for r in records:
        answers[r["query_id"].split("#r")[0]].append(r["parsed"])
    assert any(len(set(a)) > 1 for a in answers.values())  # the model sampled
    assert json.loads((run / "config.json").read_text())["config"]["repeats"] == 5
    assert _summary(run)["repeats"]["n"] == 5 and _summary(run)["complete"]
    report = (run / "report.md").read_text()
    assert "## Repeats" in report and "Every query asked 5 times" in report and "pass@5" in report


def test_summary_statistics_equal_those_computed_from_the_records(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=43)
    run = tmp_path / "run"
    with _sim(data, rate=0.6) as sim:
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "1.0", "--repeats", "4")))
    records, rep = _records(run), _summary(run)["repeats"]
    per = [100 * sum(r["correct"] is True for r in records if r.get("repeat", 0) == k) / N for k in range(4)]
    assert [x["scores"]["accuracy"] for x in rep["per_repeat"]] == pytest.approx(per)
    assert rep["mean"]["accuracy"] == pytest.approx(statistics.mean(per))
    assert rep["sd"]["accuracy"] == pytest.approx(statistics.stdev(per))
    assert _summary(run)["metrics"]["accuracy"] == pytest.approx(per[0])  # the headline is repeat 0's
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.get("repeat", 0)):
        groups[r["query_id"].split("#r")[0]].append(r)
    assert len(groups) == N and all(len(g) == 4 for g in groups.values())
    same = [len({r["parsed"] for r in g}) == 1 for g in groups.values()]
    modal = [Counter(r["parsed"] for r in g).most_common(1)[0][1] / 4 for g in groups.values()]
    assert rep["agreement"]["all_same_pct"] == pytest.approx(100 * sum(same) / N)
    assert rep["agreement"]["modal_share_pct"] == pytest.approx(100 * sum(modal) / N)
    assert 0 < sum(same) < N  # the case is not trivial: some queries agree, some do not

    def vote(g: list[dict]) -> bool:
        counts = Counter(r["parsed"] for r in g if r["parsed"] is not None)
        best = max(counts.values())
        winner = next(r["parsed"] for r in g if r["parsed"] is not None and counts[r["parsed"]] == best)
        return winner == g[0]["gold"]

    assert rep["majority_vote_pct"] == pytest.approx(100 * sum(vote(g) for g in groups.values()) / N)
    for k in range(1, 5):
        expected = 100 * statistics.mean(_brute_pass_at_k([r["correct"] is True for r in g], k)
                                         for g in groups.values())
        assert rep["pass_at_k"][str(k)] == pytest.approx(expected)
    assert rep["pass_at_k"]["1"] == pytest.approx(statistics.mean(per))
    hist = [0] * 5  # the repeats as variants: how many queries came back right c of 4 times
    for g in groups.values():
        hist[sum(r["correct"] is True for r in g)] += 1
    fit = rep["reliability"]
    assert fit["k"] == 4 and fit["n"] == N and json.loads(json.dumps(fit_histogram(hist).as_dict())) == fit
    if fit["A_adj"] is not None:  # θ·r: right because known, never more than the single-pass accuracy
        assert fit["A_adj"] <= statistics.mean(per) / 100 + 1e-9
    assert f"The repeats as variants (known/guess mixture over {N} queries, k = 4)" in (run / "report.md").read_text()


def test_a_cache_written_without_repeats_answers_repeat_zero(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=44)
    with _sim(data) as sim:
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8", out="before")))
        assert _requests(sim) == N
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8", "--repeats", "3", out="after")))
        assert _requests(sim) == 3 * N  # repeat 0 came from the cache: only repeats 1 and 2 were sent
    before = {r["query_id"]: r for r in _records(tmp_path / "before")}
    after = {r["query_id"]: r for r in _records(tmp_path / "after")}
    for qid, rec in before.items():
        assert after[qid]["request_key"] == rec["request_key"] and after[qid]["response"] == rec["response"]
        assert after[qid]["cached"] and "repeat" not in after[qid]


def test_more_repeats_grow_the_same_default_run_directory(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=45)
    argv = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--no-progress", "--temperature", "0.8"]
    with _sim(data) as sim:
        _ok(run_main([*argv, "--base-url", sim.url], cwd=tmp_path))
        _ok(run_main([*argv, "--base-url", sim.url, "--repeats", "2"], cwd=tmp_path))
        assert _requests(sim) == 2 * N
    dirs = list((tmp_path / "runs").iterdir())
    assert len(dirs) == 1 and len(_records(dirs[0])) == 2 * N


def test_with_a_seed_repeat_r_sends_seed_plus_r(tmp_path, monkeypatch):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=46)
    seeds: dict[str, list[int]] = defaultdict(list)
    reply = sim_serving.model_reply

    def capture(state, dialect, req, body, *args, **kw):  # the bodies as the simulator receives them
        seeds[req.text].append(body.get("seed"))
        return reply(state, dialect, req, body, *args, **kw)

    monkeypatch.setattr(sim_serving, "model_reply", capture)
    with _sim(data) as sim:
        _ok(run_main(_argv(sim, data, tmp_path, "--seed", "7", "--repeats", "3")))
        assert _requests(sim) == 3 * N
    assert len(seeds) == N and all(sorted(s) == [7, 8, 9] for s in seeds.values())
    records = _records(tmp_path / "run")
    assert all(r.get("repeat", 0) in (0, 1, 2) for r in records)


def test_without_repeats_summary_and_records_are_as_before(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=47)
    with _sim(data) as sim:
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8")))
        assert _requests(sim) == N
    run = tmp_path / "run"
    summary = _summary(run)
    assert "repeats" not in summary and "repeats" not in summary["config"]
    assert summary["n_queries"] == N and summary["missing"] == 0
    assert "repeats" not in json.loads((run / "config.json").read_text())["config"]
    fields = set(Record.__dataclass_fields__) - {"repeat", "via", "served_by", "served_tier", "max_tokens", "asked_with"}
    assert all(set(r) - {"via", "served_by"} == fields and "#r" not in r["query_id"] for r in _records(run))
    assert "## Repeats" not in (run / "report.md").read_text()


def test_compare_accepts_different_repeats_over_their_common_repeats(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=48)
    with _sim(data) as sim:
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8", "--repeats", "3", out="three")))
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.9", "--repeats", "2", out="two")))
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.7", out="one")))
    c = compare([tmp_path / "three", tmp_path / "two"], n_boot=200)
    note = next(n for n in c.notes if "repeats differ" in n)
    assert "compared on the 2 common repeats 0–1" in note and "ranked on the mean of 2 common repeats" in note
    for label, run in c.runs.items():  # mean ± sd of each run over repeats 0 and 1, from its records
        per = [100 * sum(r["correct"] is True for r in _records(run.path) if r.get("repeat", 0) == k) / N
               for k in (0, 1)]
        m = next(m for m in c.results if m.label == label)  # the leaderboard: the mean of the common repeats
        assert m.estimate == pytest.approx(statistics.mean(per))
        assert len(run.records) == N and all(r.repeat == 0 for r in run.records)
        assert f"{label} {json.dumps(round(statistics.mean(per), 2))} ± " \
               f"{json.dumps(round(statistics.stdev(per), 2))}" in note
    with_one = compare([tmp_path / "three", tmp_path / "one"], n_boot=0)
    assert any("compared on repeat 0, the one repeat they have in common" in n for n in with_one.notes)


def test_report_rebuilds_the_same_repeats_summary(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=49)
    run = tmp_path / "run"
    with _sim(data) as sim:
        _ok(run_main(_argv(sim, data, tmp_path, "--temperature", "0.8", "--repeats", "3")))
        before = _summary(run)
        _ok(run_main(["report", str(run)]))
        assert _requests(sim) == 3 * N
    after = _summary(run)
    assert after["not_in_run"] == 0 and after["metrics"] == before["metrics"]
    assert after["repeats"] == before["repeats"] and after["headline"] == before["headline"]


def test_dry_run_counts_every_repeat_and_batches_without_a_seed_are_refused(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=50)
    with _sim(data) as sim:
        dry = run_main([*_argv(sim, data, tmp_path, "--repeats", "3"), "--dry-run"])
        _ok(dry)
        assert _requests(sim) == 0 and re.search(rf"to send\W+{3 * N}\b", dry.stdout + dry.stderr)
    refused = run_main(["run", "mcq", "--model", "openai/gpt-4o-mini", "--data", str(data), "--batch", "--repeats", "2",
                       "--out", str(tmp_path / "b"), "--no-progress"], env={"OPENAI_API_KEY": "sk-test"})
    assert refused.returncode == 2 and "--seed" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "b").exists()
