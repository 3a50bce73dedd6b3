"""A model x benchmark matrix in one command (issue 33 items 1-3): every (benchmark, model) pair asked
at once, compared per benchmark, resumed by the same command; limits shared per endpoint; no pair
sends before every pair can start; Ctrl-C leaves every pair resumable (130).

Concurrency is shown by events, never by the clock: both simulators hold a request at the same
moment (a run that asked one model after the other could never), and the shared limit by the
simulator's own count of requests in flight."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import pytest
from cli_under_test import start_cli
from synthetic_data import make_mcq_jsonl
from waiting import DEADLINE_S, StderrWatch

from evalkit.cli import main
from evalkit.multi.matrix import run_matrix
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread
from evalkit.view import build_view

N = 4


def _both_held(a: SimThread, b: SimThread, seen: dict[str, int]) -> threading.Thread:
    """A thread that waits until both simulators hold a request at once, notes how many, then lets every
    reply go (also when that never happens, so the run ends and the test says why)."""

    def watch() -> None:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not (a.held and b.held):
            time.sleep(0.01)
        seen.update(a=a.held, b=b.held)
        a.release()
        b.release()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_two_providers_asked_at_once_compared_and_resumed_for_free(tmp_path, monkeypatch, capfd):
    data = make_mcq_jsonl(tmp_path / "d", N, seed=5)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "m"
    with SimThread(SimConfig(answer_key=key, latency_s=0.01)) as a, \
            SimThread(SimConfig(answer_key=key, latency_s=0.03)) as b:
        monkeypatch.setenv("VLLM_BASE_URL", a.url)
        monkeypatch.setenv("OPENAI_BASE_URL", b.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-sim")
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--model", "openai/sim-model", "--data", str(data),
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--no-plots"]
        a.hold()
        b.hold()
        seen: dict[str, int] = {}
        watcher = _both_held(a, b, seen)
        first = main(argv)
        watcher.join()
        said = capfd.readouterr()
        asked = (a.counters.completions, b.counters.completions)
        again = main(argv)
        said_again = capfd.readouterr()
        assert (a.counters.completions, b.counters.completions) == asked  # the re-run sent nothing
    assert first == 0, said.err
    assert seen["a"] >= 1 and seen["b"] >= 1, seen  # both servers asked at the same moment
    assert asked == (N, N)
    runs = sorted(p.name.rsplit("-", 1)[0] for p in out.iterdir() if (p / "summary.json").exists())
    assert runs == ["mcq-openai_sim-model", "mcq-vllm_sim-model"]  # the default names, under --out
    ranking = json.loads((out / "compare-mcq" / "comparison.json").read_text())["ranking"]
    assert sorted(ranking) == ["openai/sim-model", "vllm/sim-model"]
    assert (out / "compare-mcq" / "report.md").is_file() and (out / "view-mcq" / "index.html").is_file()
    assert "mcq · vllm/sim-model: accuracy" in said.out and "mcq · openai/sim-model: accuracy" in said.out
    assert again == 0, said_again.err
    assert said_again.err.count("already answered: nothing to ask") == 2


def test_two_benchmarks_by_two_models_each_option_to_its_own_benchmark(tmp_path, monkeypatch):
    data = make_mcq_jsonl(tmp_path / "d", N, seed=6)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data), "circular": True}))) as sim:
        monkeypatch.setenv("VLLM_BASE_URL", sim.url)
        result = run_matrix([{"name": "mcq", "data": str(data)}, {"name": "pope", "data": "sample"}],
                            ["vllm/sim-model", {"spec": "vllm/other-model", "label": "other"}],
                            circular=True, limit=N, out=tmp_path / "m", cache_dir=str(tmp_path / "cache"),
                            progress=False, plots=False, views=build_view)
    out = tmp_path / "m"
    assert result.exit_code == 0, [p.error for p in result.pairs]
    assert sorted(p.name for p in out.iterdir()) == sorted([
        *(p.out_dir.name for p in result.pairs), "compare-mcq", "compare-pope", "view-mcq", "view-pope"])
    assert sorted(p.out_dir.name.rsplit("-", 1)[0] for p in result.pairs) == [
        "mcq-vllm_other-model", "mcq-vllm_sim-model", "pope-vllm_other-model", "pope-vllm_sim-model"]
    for p in result.pairs:  # --circular is mcq's: its pairs have it, pope's do not
        options = json.loads((p.out_dir / "config.json").read_text())["config"]["options"]
        assert options == ({"circular": True} if p.bench == "mcq" else {}), (p.bench, options)
    assert set(result.comparisons) == {"mcq", "pope"}
    ranking = json.loads((out / "compare-pope" / "comparison.json").read_text())["ranking"]
    assert sorted(ranking) == ["other", "vllm/sim-model"]  # a model's label names it
    assert (out / "view-pope" / "index.html").is_file()
    assert not (out / "compare-pope" / "plots").exists()  # plots=False (--no-plots): none for the comparison


def test_pairs_on_one_endpoint_share_its_concurrency(tmp_path, monkeypatch):
    """Two pairs (two benchmarks) on one server with --concurrency 2: never more than 2 in flight there."""
    data = make_mcq_jsonl(tmp_path / "d", 6, seed=7)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), latency_s=0.05)) as sim:
        monkeypatch.setenv("VLLM_BASE_URL", sim.url)
        sim.hold()
        held: list[int] = []

        def two_then_go() -> None:  # the limit is reached (2 at the gate), then everything goes
            deadline = time.monotonic() + DEADLINE_S
            while sim.held < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            held.append(sim.held)
            sim.release()

        thread = threading.Thread(target=two_then_go, daemon=True)
        thread.start()
        result = run_matrix([{"name": "mcq", "data": str(data)}, {"name": "pope", "data": "sample"}],
                            ["vllm/sim-model"], limit=6, concurrency=2, out=tmp_path / "m",
                            cache_dir=str(tmp_path / "cache"), progress=False, plots=False)
        thread.join()
        counters = sim.counters.snapshot()
    assert result.exit_code == 0
    assert held == [2]
    assert counters["requests"] == 12 and counters["max_in_flight"] == 2, counters


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_pair_that_cannot_start_stops_every_pair_before_anything_is_sent(tmp_path, monkeypatch, capfd):
    data = make_mcq_jsonl(tmp_path / "d", N, seed=8)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        monkeypatch.setenv("VLLM_BASE_URL", sim.url)
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_closed_port()}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-sim")
        code = main(["run", "mcq", "--model", "vllm/sim-model", "--model", "openai/sim-model", "--data", str(data),
                     "--out", str(tmp_path / "m"), "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
        requests = sim.counters.snapshot()["requests"]
    err = _lines(capfd.readouterr().err)
    assert code == 2
    assert requests == 0  # the reachable server was asked nothing
    assert err[-1].startswith("evalkit: error: --model openai/sim-model cannot be reached"), err
    assert not list(tmp_path.glob("m/*/records.jsonl"))


def test_a_pair_stopped_later_for_a_cause_the_user_must_fix_is_exit_2_after_the_others(tmp_path, monkeypatch,
                                                                                         capfd):
    data = make_mcq_jsonl(tmp_path / "d", N, seed=13)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), strict_model=True)) as sim:
        monkeypatch.setenv("VLLM_BASE_URL", sim.url)  # one server, which serves sim-model only
        code = main(["run", "mcq", "--model", "vllm/sim-model", "--model", "vllm/nope", "--data", str(data),
                     "--out", str(tmp_path / "m"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                     "--no-plots"])
        answered = sim.counters.completions
    out = capfd.readouterr().out
    assert code == 2
    assert answered == N and "mcq · vllm/sim-model: accuracy" in out  # the other pair finished
    assert "mcq · vllm/nope: stopped · --model vllm/nope: the server does not serve model 'nope'" in out
    assert not (tmp_path / "m" / "compare-mcq").exists()  # one finished run: nothing to compare


def test_flags_a_matrix_refuses_are_one_line(tmp_path, capfd):
    data = make_mcq_jsonl(tmp_path / "d", 2, seed=9)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    cases = [
        (["run", "mcq", "pope", "--model", "vllm/a", "--data", str(data)], "--data with several benchmarks"),
        (["run", "mcq", "--model", "vllm/a", "--model", "vllm/b", "--base-url", "http://127.0.0.1:9/v1"],
         "--base-url with several models: 2 models take a server URL (vllm/a, vllm/b); give each model its "
         "base_url in a --suite file"),
        (["run", "mcq", "--model", "openai/gpt-4o", "--model", "openai/gpt-4o", "--dry-run"], "named twice"),
        (["run", "mcq", "--model", "openai/gpt-4o", "--model", "anthropic/claude-haiku-4-5", "--out", str(run),
          "--dry-run"], "is a run directory (it holds config.json)"),
        (["run", "mcq", "pope", "--model", "openai/gpt-4o", "--td-set", "cases"],
         "--td-set is an option of benchmark tdbench, not of mcq, pope"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2, argv
        err = _lines(capfd.readouterr().err)
        assert len(err) == 1 and expected in err[0], (argv, err)


def test_dry_run_prices_the_whole_matrix(tmp_path):
    data = make_mcq_jsonl(tmp_path / "d", N, seed=10)
    result = run_matrix(["mcq"], ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"], data=str(data),
                        dry_run=True, out=tmp_path / "m", cache_dir=str(tmp_path / "cache"))
    d = result.dry_run
    assert d is not None and [x["model"] for x in d["pairs"]] == ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"]
    assert d["total"]["to_send"] == sum(x["to_send"] for x in d["pairs"]) == 2 * N
    assert d["total"]["cost_high_usd"] == pytest.approx(sum(x["cost_high_usd"] for x in d["pairs"]))
    assert all(x["cost_high_usd"] > 0 for x in d["pairs"]) and d["total"]["unpriced"] == []
    assert not (tmp_path / "m").exists()  # a dry run writes nothing


@pytest.mark.slow
def test_ctrl_c_stops_every_pair_resumable(tmp_path):
    data = make_mcq_jsonl(tmp_path / "d", 8, seed=12)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key)) as a, SimThread(SimConfig(answer_key=key)) as b:
        env = {"VLLM_BASE_URL": a.url, "OPENAI_BASE_URL": b.url + "/v1", "OPENAI_API_KEY": "sk-sim"}
        argv = ["run", "mcq", "--model", "vllm/sim-model", "--model", "openai/sim-model", "--data", str(data),
                "--out", str(tmp_path / "m"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                "--concurrency", "2"]
        a.hold(after=2)
        b.hold(after=2)
        proc = start_cli(argv, env=env)
        stderr = StderrWatch(proc)
        try:
            deadline = time.monotonic() + DEADLINE_S
            while not (a.held and b.held):  # both pairs mid-way
                assert proc.poll() is None and time.monotonic() < deadline, stderr.text
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            assert stderr.until("openai/sim-model: interrupted: receiving"), stderr.text
        finally:
            a.release()
            b.release()
        _, err = stderr.finish()
        first = (a.counters.completions, b.counters.completions)
        again = start_cli(argv, env=env)
        _, err_again = again.communicate(timeout=DEADLINE_S)
        total = (a.counters.completions, b.counters.completions)
    assert proc.returncode == 130 and "re-run the same command to resume" in err, err
    assert 2 < first[0] < 8 and 2 < first[1] < 8, first  # both stopped mid-way, the replies on their way kept
    assert again.returncode == 0, err_again
    assert total == (8, 8)  # the re-run asked only what was missing
