"""A malformed reply is that query's classified error, for every provider, never a crash.

Each CLI test runs `evalkit run mcq` (tests/cli_under_test.py run_main: main() in this process) against the
simulator's hostile routes (tests/hostile_routes.py): `/hostile/<behaviour>:3` spoils every third
reply. evalkit 0.1.0 crashed on some (AttributeError, exit 1, records lost), took others for an
empty answer, and re-bought answers whose only fault was a token count; run with
EVALKIT_UNDER_TEST=/path/to/0.1.0 to see each test fail there.

The helpers here (keys, pointing a provider at the simulator, reading a run) are shared with
test_redirects_secrets.py and test_response_cap.py.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_under_test import run_main
from hostile_routes import HostileRoutes
from sim_providers import ANSWER_AT, plain_providers, wire_of
from sim_providers import pointed_at as sim_pointed_at
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, Message
from evalkit.providers import create_provider, parse_spec
from evalkit.providers.registry import RECORDS
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread, start_sim

PROVIDERS = plain_providers()  # the registry's, on the simulator's plain routes (tests/sim_providers.py)


def hostile_key(provider: str) -> tuple[str, str]:
    """(its key variable, a key) for the provider: characters that change under percent- and base64-encoding,
    so every form is tested."""
    return RECORDS[provider].key_env[0], f"sk-{provider}/Hostile+Key{sum(map(ord, provider)) % 100:02d}="


def pointed_at(provider: str, base: str) -> tuple[list[str], dict[str, str]]:
    """(extra CLI args, environment) sending `provider` to `base` with its key."""
    name, key = hostile_key(provider)
    return sim_pointed_at(provider, base, {name: key})


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    requests: int  # requests the simulator received during this run
    run_dir: Path

    @property
    def records(self) -> list[dict]:
        path = self.run_dir / "records.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    @property
    def errors(self) -> list[dict]:
        return [r for r in self.records if r["error"] is not None]


class McqRuns:
    """`evalkit run mcq` on one small dataset, its run directory and cache kept between runs."""

    def __init__(self, tmp_path: Path, data: Path, sim: SimThread):
        self.tmp, self.data, self.sim = tmp_path, data, sim

    def __call__(self, provider: str, path: str, *extra: str) -> Run:
        args, env = pointed_at(provider, self.sim.url + path)
        before = self.sim.counters.snapshot()["requests"]
        proc = run_main(["run", "mcq", "--model", f"{provider}/sim-model", "--data", str(self.data),
                        "--out", str(self.tmp / "run"), "--cache-dir", str(self.tmp / "cache"), "--no-progress",
                        *args, *extra], env=env)
        return Run(proc, self.sim.counters.snapshot()["requests"] - before, self.tmp / "run")


def sim_for(runs_data: Path) -> SimThread:
    """A simulator that knows `runs_data`'s answers, with the hostile routes (their log: sim.routes.log)."""
    return SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(runs_data)})), routes=HostileRoutes())


@pytest.fixture
def mcq12(tmp_path):
    """Twelve questions, a simulator that answers them all correctly, and a way to run the CLI."""
    data = make_mcq_jsonl(tmp_path / "ds", 12, seed=5)
    with sim_for(data) as sim:
        yield McqRuns(tmp_path, data, sim)


def assert_clean(run: Run) -> None:
    assert "Traceback" not in run.proc.stderr + run.proc.stdout, run.proc.stderr[-3000:]
    ids = [r["query_id"] for r in run.records]
    assert len(ids) == len(set(ids)) == 12, run.proc.stderr[-3000:]  # one line per query


# ---- the command line --------------------------------------------------------------------------

SPOILERS = ("content-number", "content-list", "choices-empty", "json-array", "not-json", "invalid-utf8")


# each spoiler once through the command line, the providers in turn (every behaviour meets every
# provider in process below: test_every_hostile_reply_is_classified_by_every_provider)
SPOILED = list(zip(SPOILERS, ("openai", "anthropic", "google", "anthropic", "google", "vllm"), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize(("behaviour", "provider"), SPOILED)
def test_each_spoiled_reply_is_its_querys_transient_error(mcq12, provider, behaviour):
    run = mcq12(provider, f"/hostile/{behaviour}:3", "--max-attempts", "1")
    assert_clean(run)
    assert run.proc.returncode == 1 and run.requests == 12
    assert [r["error"] for r in run.errors] == ["transient"] * 4  # requests 3, 6, 9, 12 were spoiled
    assert all(r["error_message"].startswith("malformed reply: ") for r in run.errors), run.errors
    assert sum(bool(r["correct"]) for r in run.records) == 8
    assert all(r["response"] in (None, "") for r in run.errors)


def content_number(provider: str) -> str:
    """The error naming where the provider's wire format keeps its answer text."""
    return f"malformed reply: {ANSWER_AT[wire_of(provider)]} is a number, not text"


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_and_a_rerun_answer_every_query_once(mcq12, provider):
    first = mcq12(provider, "/hostile/content-number:3", "--max-attempts", "1")
    assert_clean(first)
    assert first.proc.returncode == 1 and first.requests == 12 and len(first.errors) == 4
    assert {r["error_message"] for r in first.errors} == {content_number(provider)}
    second = mcq12(provider, "/hostile/content-number:3")  # default attempts: the four errors are asked again
    assert_clean(second)
    # requests 13-16: the four; the 15th is spoiled again and retried as a 17th
    assert second.proc.returncode == 0 and second.requests == 5 and second.errors == []
    assert sum(bool(r["correct"]) for r in second.records) == 12
    third = mcq12(provider, "/hostile/content-number:3")
    assert third.proc.returncode == 0 and third.requests == 0  # nothing answered is ever sent again
    per_key = mcq12.sim.counters.snapshot()["per_key"]
    assert len(per_key) == 12 and set(per_key.values()) == {1}


@pytest.mark.slow
@pytest.mark.parametrize(("behaviour", "provider"), [("usage-string", "openai"), ("usage-string", "anthropic"),
                                                     ("usage-negative", "vllm"), ("usage-negative", "google")])
def test_a_bad_token_count_keeps_the_paid_answer(mcq12, provider, behaviour):
    run = mcq12(provider, f"/hostile/{behaviour}:3")
    assert_clean(run)
    assert run.proc.returncode == 0 and run.errors == []
    assert run.requests == 12  # no answer was thrown away and bought again
    assert sum(bool(r["correct"]) for r in run.records) == 12
    usages = [r["usage"] for r in run.records]
    assert all(v >= 0 for u in usages for v in u.values())
    assert sum(u["input_tokens"] == 0 and u["output_tokens"] == 0 for u in usages) == 4
    assert sum(u["input_tokens"] > 0 and u["output_tokens"] > 0 for u in usages) == 8


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_queries_that_only_get_broken_replies_are_both_recorded(tmp_path, provider):
    data = make_mcq_jsonl(tmp_path / "ds", 2, seed=5)
    with sim_for(data) as sim:
        run = McqRuns(tmp_path, data, sim)(provider, "/hostile/content-number", "--max-attempts", "2")
    assert "Traceback" not in run.proc.stderr
    assert run.proc.returncode == 1 and run.requests == 4
    assert [r["query_id"] for r in run.records] == ["q00000", "q00001"]
    assert [r["error"] for r in run.records] == ["transient", "transient"]
    assert {r["error_message"].split(":")[0] for r in run.records} == {"malformed reply"}


# ---- every behaviour, every provider, in process ------------------------------------------------

MALFORMED = {"content-number", "content-list", "content-object", "choices-empty", "no-candidates", "not-json",
             "json-array", "invalid-utf8"}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_hostile_reply_is_classified_by_every_provider(provider):
    """What each adapter makes of each defect, one request each, without the CLI around it."""
    found: dict[str, tuple[str, str]] = {}
    async with await start_sim(SimConfig(), routes=HostileRoutes()) as sim:
        for behaviour in sorted(MALFORMED | {"usage-string", "usage-negative"}):
            args, env = pointed_at(provider, f"{sim.url}/hostile/{behaviour}")
            spec = parse_spec(f"{provider}/sim-model", [args[1]] if args else [], env=env)
            p = create_provider(spec, env)
            try:
                out = await p.complete([Message.user("Colour?\nA. red\nB. blue")], GenParams(max_tokens=8), [])
                found[behaviour] = ("ok", f"{out.text}|{out.usage.input_tokens}|{out.usage.output_tokens}")
            except ProviderError as e:
                found[behaviour] = (e.kind, e.message)
            finally:
                await p.close()
    for behaviour in MALFORMED:
        kind, message = found[behaviour]
        assert kind == "transient" and message.startswith("malformed reply: "), (behaviour, message)
    assert found["usage-string"][0] == "ok" and found["usage-string"][1].endswith("|0|0")
    assert found["usage-negative"][0] == "ok" and found["usage-negative"][1].endswith("|0|0")
    assert found["invalid-utf8"][1] == "malformed reply: body is not UTF-8"
    assert found["json-array"][1] == "malformed reply: body is a list, not an object"
    assert found["not-json"][1] == "malformed reply: body is not JSON"
