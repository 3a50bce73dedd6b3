"""Failure paths through the CLI: fail fast, name the cause, never turn a broken run into a score.

Each case is one row of docs/failures.md (tests/cli/failure_table.py renders it from CASES): what a
user tried, the exit code and the message they get. Each fails on evalkit 0.1.0 (881f989), where
the same commands gave a traceback, a minute of silent retries, a score of 0.00 or nothing at all.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_under_test import checkout_under_test, run_cli
from synthetic_data import make_mcq_jsonl

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

NO_KEYS = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
HIDE_SDKS = '''
import sys

class _Hidden:  # the provider SDKs, as on a machine where `pip install evalkit` left them out
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "anthropic" or name.startswith("google.genai"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Hidden())
'''
# Every connection the child tries to the port in EVALKIT_TEST_PORT, one line each in EVALKIT_TEST_CONNECTS
# (a `socket.connect` audit event is raised for each attempt, asyncio's and aiohttp's included).
COUNT_CONNECTS = '''
import os
import sys

_PORT = int(os.environ["EVALKIT_TEST_PORT"])
_LOG = os.environ["EVALKIT_TEST_CONNECTS"]


def _count(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and len(args[1]) >= 2 and args[1][1] == _PORT:
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(f"{args[1][0]}:{args[1][1]}\\n")


sys.addaudithook(_count)
'''


@dataclass
class Seen:
    code: int
    out: str  # stdout + stderr
    folder: Path

    def written(self) -> list[str]:
        return sorted(p.name for p in self.folder.iterdir() if p.name != "ds")


def says(template: str, out: str) -> bool:
    """`out` (whitespace folded) holds `template`, where PORT stands for a port number and … for anything."""
    pattern = re.escape(template).replace("PORT", r"\d+").replace("…", ".*?")
    return re.search(pattern, " ".join(out.split())) is not None


@dataclass(frozen=True)
class Case:
    id: str
    tried: str  # what the user did, as docs/failures.md says it
    code: int
    message: str  # what they read (a fragment; PORT: a port number, …: anything; see says())
    run: Callable[[Path], Seen]
    check: Callable[[Seen], None] = field(default=lambda seen: None)


def _evalkit(folder: Path, args: list[str], env: dict[str, str] | None = None) -> Seen:
    done = run_cli(args, env={**NO_KEYS, **(env or {})}, cwd=folder, timeout=120)
    return Seen(done.returncode, done.stdout + done.stderr, folder)


def _data(folder: Path, n: int = 6) -> Path:
    return make_mcq_jsonl(folder / "ds", n, seed=3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _without_sdks(folder: Path, provider: str, key_var: str) -> Seen:
    hide = folder.parent / f"{folder.name}-hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_SDKS, encoding="utf-8")
    model = {"anthropic": "anthropic/claude-sonnet-4-5", "google": "google/gemini-2.5-flash"}[provider]
    return _evalkit(folder, ["run", "mcq", "--model", model, "--data", str(_data(folder)), "--no-progress"],
                    env={key_var: "x", "PYTHONPATH": f"{hide}{os.pathsep}{checkout_under_test()}"})


def _connects_log(folder: Path) -> Path:
    return folder.parent / f"{folder.name}-connects.log"


def _dead_server(folder: Path) -> Seen:
    hook = folder.parent / f"{folder.name}-count"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(COUNT_CONNECTS, encoding="utf-8")
    port = _free_port()
    return _evalkit(folder, ["run", "mcq", "--model", "vllm/sim-model", "--base-url", f"http://127.0.0.1:{port}",
                             "--data", str(_data(folder)), "--no-progress"],
                    env={"EVALKIT_TEST_PORT": str(port), "EVALKIT_TEST_CONNECTS": str(_connects_log(folder)),
                         "PYTHONPATH": f"{hook}{os.pathsep}{checkout_under_test()}"})


def _no_scheme(folder: Path) -> Seen:
    return _evalkit(folder, ["run", "mcq", "--model", "vllm/sim-model", "--base-url", f"127.0.0.1:{_free_port()}",
                             "--data", str(_data(folder)), "--no-progress"])


def _against(config: SimConfig, folder: Path, args: list[str], env: dict[str, str] | None = None) -> Seen:
    with SimThread(config) as sim:
        return _evalkit(folder, [a.replace("{sim}", sim.url) for a in args], env)


def _unknown_model(folder: Path) -> Seen:
    return _against(SimConfig(strict_model=True, owned_by="vllm"), folder, [
        "run", "mcq", "--model", "vllm/Qwen2.5-VL-7B", "--base-url", "{sim}", "--data", str(_data(folder)),
        "--no-progress"])


def _not_served(folder: Path) -> Seen:
    return _against(SimConfig(strict_model=True), folder, [
        "run", "mcq", "--model", "openai-compatible/Qwen2.5-VL-7B", "--base-url", "{sim}/v1", "--data",
        str(_data(folder)), "--no-progress"])


def _key_refused(folder: Path) -> Seen:
    return _against(SimConfig(api_key="the-right-key"), folder, [
        "run", "mcq", "--model", "vllm/sim-model", "--base-url", "{sim}", "--data", str(_data(folder)),
        "--no-progress"], env={"VLLM_API_KEY": "a-wrong-key"})


def _judge_dead(folder: Path) -> Seen:
    data = _data(folder)
    return _against(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)})), folder, [
        "run", "mcq", "--model", "vllm/sim-model", "--base-url", "{sim}", "--data", str(data),
        "--judge", "vllm/sim-model", "--judge-base-url", f"http://127.0.0.1:{_free_port()}", "--no-progress"])


def _nothing_answered(folder: Path) -> Seen:
    from evalkit.sim.machinery.faults import SimFaults

    return _against(SimConfig(faults=SimFaults(rate=1.0, kinds=("refusal",))), folder, [
        "run", "mcq", "--model", "vllm/sim-model", "--base-url", "{sim}", "--data", str(_data(folder)),
        "--out", "run", "--no-progress"])


def _same_error(folder: Path) -> Seen:
    from evalkit.sim.machinery.faults import SimFaults

    return _against(SimConfig(faults=SimFaults(rate=1.0, kinds=("400",))), folder, [
        "run", "mcq", "--model", "vllm/sim-model", "--base-url", "{sim}", "--data", str(_data(folder)),
        "--out", "run", "--no-progress"])


def _placeholders(folder: Path) -> Seen:
    (folder / "ds").mkdir()
    from synthetic_data import draw_image

    lines = []
    for i in range(12):
        draw_image(i, 64).save(folder / "ds" / f"{i}.png")
        lines.append({"id": f"p{i}", "image": f"{i}.png", "question": f"Which object is at the <dir:top-left> ({i})?",
                      "options": {"A": "<dir:top>", "B": "<dir:bottom>", "C": "<dir:left>", "D": "<dir:right>"},
                      "answer": "ABCD"[i % 4]})
    data = folder / "ds" / "rot.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return _against(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)})), folder, [
        "run", "mcq", "--model", "vllm/sim-model", "--base-url", "{sim}", "--data", str(data), "--out", "run",
        "--no-progress"])


def _sim_mismatch(folder: Path) -> Seen:
    data = _data(folder)
    return _against(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)})), folder, [
        "run", "mcq", "--model", "vllm/sim-model", "--base-url", "{sim}", "--data", str(data), "--circular",
        "--no-progress"])


def _empty_data(folder: Path) -> Seen:
    (folder / "ds").mkdir()
    data = folder / "ds" / "empty.jsonl"
    data.write_text("")
    return _evalkit(folder, ["run", "mcq", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9",
                             "--data", str(data), "--no-progress"])


def _images_missing(folder: Path) -> Seen:
    from synthetic_data import REPO

    (folder / "ds").mkdir()
    data = folder / "ds" / "if_bench.json"  # its images are not beside it: every one is missing
    data.write_text((REPO / "datasets" / "if-bench" / "if_bench_sample.json").read_text(encoding="utf-8"))
    return _evalkit(folder, ["run", "if-bench", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9",
                             "--data", str(data), "--skip-missing", "--no-progress"])


def _judge_key(folder: Path) -> Seen:
    return _evalkit(folder, ["run", "mcq", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9",
                             "--data", str(_data(folder)), "--judge", "openai/gpt-4o-mini", "--no-progress"])


def _one_line(seen: Seen) -> None:
    _nothing_written(seen)
    assert len(seen.out.strip().splitlines()) == 1, seen.out


def _summary(seen: Seen) -> dict:
    return json.loads((seen.folder / "run" / "summary.json").read_text(encoding="utf-8"))


def _nothing_written(seen: Seen) -> None:
    assert seen.written() == [], seen.written()


def _dead_checks(seen: Seen) -> None:
    """Gives up at the first refused connection: one attempt, no retry (0.1.0 retried every query for a
    minute). Counted, not timed: a busy machine makes each attempt slower, never more numerous."""
    _nothing_written(seen)
    log = _connects_log(seen.folder)
    connects = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    assert len(connects) == 1, connects


def _no_score(seen: Seen) -> None:
    s = _summary(seen)
    assert s["failures"]["errors"] == 6 and s["failures"]["answered"] == 0 and s["metrics_answered"] is None
    assert "accuracy" not in seen.out and "95% CI" not in seen.out  # no metric printed at all
    assert seen.out.index("6 queries failed") < seen.out.index("correct")  # the banner leads
    report = (seen.folder / "run" / "report.md").read_text(encoding="utf-8")
    assert "6 queries failed" in report and "Official metrics" not in report
    assert not (seen.folder / "run" / "plots").exists()


def _each_recorded(seen: Seen) -> None:
    """The run stopped on the error every request got alike; each request that ended is recorded, no summary."""
    lines = (seen.folder / "run" / "records.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    assert 3 <= len(records) <= 6 and {r["error"] for r in records} == {"permanent"}
    assert not (seen.folder / "run" / "summary.json").exists()


def _all_right(seen: Seen) -> None:
    s = _summary(seen)
    assert s["metrics"]["accuracy"] == 100.0 and s["n_queries"] == 12


def _key_checks(seen: Seen) -> None:
    _nothing_written(seen)
    assert "a-wrong-key" not in seen.out


CASES = [
    Case("empty-data", "`--data` a file that holds no items", 2, "nothing to evaluate: it holds no items",
         _empty_data, _one_line),
    Case("all-skipped", "`--skip-missing` with every image missing", 2,
         "were skipped (image files missing)", _images_missing, _one_line),
    Case("judge-key", "`--judge openai/…` without OPENAI_API_KEY", 2,
         "OPENAI_API_KEY is not set (needed for --judge openai/gpt-4o-mini)", _judge_key, _one_line),
    Case("sdk-anthropic", "`--model anthropic/…` where the anthropic SDK is not installed", 2,
         "needs the anthropic SDK, which is not installed: pip install 'evalkit[anthropic]'",
         lambda f: _without_sdks(f, "anthropic", "ANTHROPIC_API_KEY"), _nothing_written),
    Case("sdk-google", "`--model google/…` where google-genai is not installed", 2,
         "needs the google SDK, which is not installed: pip install 'evalkit[google]'",
         lambda f: _without_sdks(f, "google", "GEMINI_API_KEY"), _nothing_written),
    Case("dead-server", "`--base-url http://127.0.0.1:PORT` with nothing listening", 2,
         "--model vllm/sim-model cannot be reached: http://127.0.0.1:PORT: connection refused", _dead_server, _dead_checks),
    Case("no-scheme", "`--base-url 127.0.0.1:PORT` (no scheme)", 2,
         "is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)", _no_scheme, _nothing_written),
    Case("unknown-model", "`--model vllm/NAME` that a vLLM server does not serve", 2,
         "model 'Qwen2.5-VL-7B' is not served there (it serves: sim-model)", _unknown_model, _nothing_written),
    Case("not-served", "`--model openai-compatible/NAME` that a server other than vLLM neither lists nor serves", 2,
         "--model openai-compatible/Qwen2.5-VL-7B: the server does not serve model 'Qwen2.5-VL-7B' (HTTP 404: The "
         "model `Qwen2.5-VL-7B` does not exist.); it lists: sim-model", _not_served, _nothing_written),
    Case("key-refused", "a key the server refuses (HTTP 401)", 2,
         "--model vllm/sim-model cannot be reached: http://127.0.0.1:PORT: HTTP 401: the API key was refused",
         _key_refused, _key_checks),
    Case("judge-unreachable", "`--judge` whose endpoint does not answer", 2,
         "--judge vllm/sim-model cannot be reached: http://127.0.0.1:PORT: connection refused", _judge_dead, _nothing_written),
    Case("nothing-answered", "every request refused on content grounds (a refusal each time)", 1,
         "6 queries failed: 6 × content refused (content_filter) nothing was answered: no metric is reported",
         _nothing_answered, _no_score),
    Case("same-error", "every request refused alike (HTTP 400 each time)", 2,
         "--model vllm/sim-model: the first 3 requests all failed with the same error, so the run stopped there: "
         "HTTP 400: bad request (injected) (fix that, then run the same command again)", _same_error, _each_recorded),
    Case("placeholders", "a JSONL set with `<dir:top-left>` placeholders, without `--rotations`", 0,
         "accuracy = 100.00, 95% CI [100.00, 100.00]", _placeholders, _all_right),
    Case("sim-mismatch", "`--circular` against a simulator keyed without it", 0,
         "the simulated server at http://127.0.0.1:PORT was asked 18 questions its answer key does not hold and "
         "answered them at chance", _sim_mismatch),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_failure_path(case: Case, tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    seen = case.run(folder)
    assert "Traceback" not in seen.out, seen.out[-3000:]
    assert seen.code == case.code, seen.out[-3000:]
    assert says(case.message, seen.out), seen.out[-3000:]
    case.check(seen)
