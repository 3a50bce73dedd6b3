"""`openai-compatible/<service>/<model>` (issue 43, item 4): an OpenAI-shaped service from `<SERVICE>_API_KEY`
and `<SERVICE>_BASE_URL` alone, with no code per service. Its cache keys and run directory are those of
`openai-compatible/<model> --base-url <the same URL>`; every 0.3 spelling keeps 0.3's reading (a slash in a
model name is normal for self-hosted servers), its keys and its run directory.

The pinned literals were computed with the code of commit fa4a05a (0.3's formats; the service form did not
exist there, so its keys are pinned as equal to the `--base-url` spelling's) and again with this one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from synthetic_data import make_mcq_jsonl

import evalkit
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import Runner
from evalkit.ask.store.cache import NullCache
from evalkit.cli import main as cli_main
from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, Query, TextPart
from evalkit.engine.resume import KeyOnlyProvider
from evalkit.images.pipeline import ImagePipeline
from evalkit.providers import api_key_for, parse_spec, resolve_auto
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

KEY = "tgp-test-SERVICE-KEY-0123456789"  # must be found in no file a run writes
SERVICE_URL = "https://api.together.example/v1"
QWEN_URL = "http://gpu1:8000/"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider variables from the machine: only what a test sets."""
    for name in [k for k in os.environ if k.startswith(("OPENAI", "VLLM", "TOGETHER", "QWEN", "EVALKIT"))]:
        monkeypatch.delenv(name)
    return monkeypatch




def service_sim(data: Path) -> SimThread:
    """A service that serves `some-model` only (404 for any other name) and 401s requests without KEY."""
    return SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), served_model_name="some-model",
                               strict_model=True, api_key=KEY))


def files_under(*folders: Path) -> list[Path]:
    return [p for d in folders for p in d.rglob("*") if p.is_file()]


# ---- (a) a run with only TOGETHER_API_KEY and TOGETHER_BASE_URL set ----------------------------------------


def test_a_service_runs_from_its_two_variables_and_its_key_stays_off_disk(tmp_path, clean_env, bodies, capfd,
                                                                          no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 6, seed=5)
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    with service_sim(data) as sim:
        clean_env.setenv("TOGETHER_API_KEY", KEY)
        clean_env.setenv("TOGETHER_BASE_URL", sim.url)
        code = cli_main(["run", "mcq", "--model", "openai-compatible/together/some-model", "--data", str(data),
                         "--out", str(run_dir), "--cache-dir", str(cache), "--no-progress"])
        heard = sim.heard
    out = capfd.readouterr()
    assert code == 0, out.err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["correct"] == 6 and summary["counts"]["errors"] == 0
    assert summary["metrics"]["accuracy"] == 100.0
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all(r["error"] is None and r["correct"] for r in records)
    # the service heard the model without the service, with the key as a bearer token (it 401s without it)
    assert len(bodies) == 6 and {b["model"] for b in bodies} == {"some-model"}
    chats = [h for h in heard if h.path.endswith("/chat/completions")]
    assert len(chats) == 6 and all(h.auth == ("bearer",) for h in chats)
    identity = json.loads((run_dir / "config.json").read_text())["identity"]
    assert identity["model"] == "openai-compatible/some-model" and identity["endpoint"] == sim.url + "/v1"
    assert KEY not in out.out and KEY not in out.err
    files = files_under(run_dir, cache)
    assert any(p.name == "records.jsonl" for p in files) and any(p.parent == cache for p in files)
    for p in files:
        assert KEY.encode() not in p.read_bytes(), p


def test_the_base_url_spelling_finds_the_service_forms_answers(tmp_path, clean_env, no_plots):
    """Shared keys, end to end: the same model at the same URL through `--base-url` asks nothing again."""
    data = make_mcq_jsonl(tmp_path / "ds", 5, seed=6)
    common: dict[str, Any] = {"data": str(data), "cache_dir": str(tmp_path / "cache"), "progress": False}
    with service_sim(data) as sim:
        clean_env.setenv("TOGETHER_API_KEY", KEY)
        clean_env.setenv("TOGETHER_BASE_URL", sim.url)
        first = evalkit.run("mcq", "openai-compatible/together/some-model", out=str(tmp_path / "a"), **common)
        asked = sim.counters.snapshot()["completions"]
        again = evalkit.run("mcq", "openai-compatible/some-model", base_url=sim.url, out=str(tmp_path / "b"),
                            **common)
        assert sim.counters.snapshot()["completions"] == asked == 5
    assert first.exit_code == again.exit_code == 0
    assert again.summary["cache"]["hits"] == 5 and again.summary["metrics"] == first.summary["metrics"]


def test_auto_names_the_services_one_model_with_its_key(tmp_path):
    env = {"TOGETHER_API_KEY": KEY}
    with service_sim(make_mcq_jsonl(tmp_path / "ds", 1)) as sim:
        spec = parse_spec("openai-compatible/together/auto", (), {**env, "TOGETHER_BASE_URL": sim.url})
        resolved = asyncio.run(resolve_auto(spec, env))
    assert (resolved.model, resolved.service) == ("some-model", "together")


# ---- (b) the keys of both spellings, and of a 0.3 slash-named model -----------------------------------------

PNG_4X4 = base64.b64decode(  # the fixed picture of tests/providers/test_provider_pins.py
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAOUlEQVR4nGNgYGBQjV7rtS0qX5CdYUrOlp3HE+8p"
    "8THX7mbUuJGhGr0Wghj2uMg8nH+S7VeZdqgyANGpE1tBiwQ+AAAAAElFTkSuQmCC")
TEXT = ("Which colour is the top-left pixel?\nA. red\nB. green\nC. blue\nD. black\n"
        "Answer with the option's letter.")

# computed at fa4a05a (0.3) for the `--base-url` spellings, and unchanged here
SOME_MODEL_KEYS = ["4630c08a7e21da52c205893621588bb669c3df96e778ae72e27f1c7ce3919fe9"]
SOME_MODEL_DIR = "mcq-openai-compatible_some-model-7c37cc6d71"
QWEN_KEYS = ["c45d7a03764e5ff14ccc2c65a20b1935c8d298a80de54689743e32964f4e73b0",  # today's endpoint spelling
             "eefdbea8f4a9a2f7acbe969a213e131975d02cb1769bd36bf56e98c7613687ef"]  # 0.1.0's, looked up too
QWEN_DIR = "mcq-openai-compatible_Qwen_Qwen2.5-VL-7B-Instruct-ac515b7d42"


def fixed_query() -> Query:
    message = Message("user", (ImagePart(ImageRef.from_bytes(PNG_4X4)), TextPart(TEXT)))
    return Query(id="pin-1", item_id="pin-1", base_id="pin-1", variant={}, messages=(message,), gold="A",
                 options={"A": "red", "B": "green", "C": "blue", "D": "black"},
                 params=GenParams(temperature=0.0, max_tokens=64, seed=1234))


def keys_of(model: str, base_urls: tuple[str, ...], env: dict[str, str]) -> tuple[str, str, str, list[str]]:
    """(provider, model, endpoint, every key the runner looks the fixed request up under), as a dry run does."""
    spec = parse_spec(model, base_urls, env)
    with contextlib.closing(ImagePipeline()) as pipeline:
        runner = Runner(KeyOnlyProvider(spec), limiter=Limiter(concurrency=1), cache=NullCache(), pipeline=pipeline)
        return spec.provider, spec.model, spec.endpoint, list(runner.keys_of(fixed_query()))


def dry_run_dir(model: str, base_urls: tuple[str, ...], env: dict[str, str], cache: Path) -> str:
    options: dict[str, Any] = {"data": str(dataset_path("demo", "mcq.tsv")), "dry_run": True,
                               "cache_dir": str(cache), "progress": False}
    if base_urls:
        options["base_url"] = base_urls
    return evalkit.run("mcq", model, **options, env=env, console=Console(file=io.StringIO())).out_dir.name


def test_both_spellings_share_keys_and_run_directory(tmp_path):
    service = keys_of("openai-compatible/together/some-model", (), {"TOGETHER_BASE_URL": SERVICE_URL})
    plain = keys_of("openai-compatible/some-model", (SERVICE_URL,), {})
    assert service == plain == ("openai-compatible", "some-model", SERVICE_URL, SOME_MODEL_KEYS)
    assert dry_run_dir("openai-compatible/together/some-model", (), {"TOGETHER_BASE_URL": SERVICE_URL},
                       tmp_path) == dry_run_dir("openai-compatible/some-model", (SERVICE_URL,), {}, tmp_path) \
        == SOME_MODEL_DIR


def test_a_slash_named_model_keeps_its_03_keys_and_run_directory(tmp_path):
    expected = ("openai-compatible", "Qwen/Qwen2.5-VL-7B-Instruct", "http://gpu1:8000/v1", QWEN_KEYS)
    assert keys_of("openai-compatible/Qwen/Qwen2.5-VL-7B-Instruct", (QWEN_URL,), {}) == expected
    # --base-url given: 0.3's reading even where QWEN_BASE_URL is set
    env = {"QWEN_BASE_URL": SERVICE_URL, "QWEN_API_KEY": "k"}
    assert keys_of("openai-compatible/Qwen/Qwen2.5-VL-7B-Instruct", (QWEN_URL,), env) == expected
    assert dry_run_dir("openai-compatible/Qwen/Qwen2.5-VL-7B-Instruct", (QWEN_URL,), env, tmp_path) == QWEN_DIR


# ---- (c) what is refused, and what keeps 0.3's reading -----------------------------------------------------


def test_a_missing_service_key_is_one_line_exit_2_and_nothing_written(tmp_path, clean_env, capsys):
    data = make_mcq_jsonl(tmp_path / "ds", 2)
    clean_env.setenv("TOGETHER_BASE_URL", SERVICE_URL)
    clean_env.setenv("OPENAI_API_KEY", "sk-not-the-services")  # openai-compatible/'s own key does not stand in
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    code = cli_main(["run", "mcq", "--model", "openai-compatible/together/some-model", "--data", str(data),
                     "--out", str(run_dir), "--cache-dir", str(cache), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "TOGETHER_API_KEY" in err, err
    assert not run_dir.exists() and not cache.exists()
    with pytest.raises(EvalkitError, match=r"^TOGETHER_API_KEY is not set \(needed for --model "
                                           r"openai-compatible/together/some-model, as TOGETHER_BASE_URL is set\)$"):
        evalkit.run("mcq", "openai-compatible/together/some-model", data=str(data), out=str(run_dir),
                    cache_dir=str(cache), progress=False)
    assert not run_dir.exists() and not cache.exists()


def test_the_03_readings_stand():
    env = {"TOGETHER_BASE_URL": SERVICE_URL, "TOGETHER_API_KEY": KEY}
    # --base-url given: everything after openai-compatible/ is the model, and openai-compatible/'s key is read
    spec = parse_spec("openai-compatible/together/m", ("http://h:1",), env)
    assert (spec.model, spec.base_urls, spec.service) == ("together/m", ("http://h:1",), None)
    assert api_key_for(spec, env) is None
    # TOGETHER_BASE_URL unset: as in 0.3, OPENAI_BASE_URL's server and the model `together/m` ...
    spec = parse_spec("openai-compatible/together/m", (), {"OPENAI_BASE_URL": "http://o:2/v1"})
    assert (spec.model, spec.base_urls, spec.service) == ("together/m", ("http://o:2/v1",), None)
    # ... or, with no URL at all, 0.3's one line asking for one (which now names the service's variables too)
    with pytest.raises(EvalkitError, match=r"^--model 'openai-compatible/together/m' needs --base-url \(or "
                                           r"OPENAI_BASE_URL; or, for the service together, TOGETHER_BASE_URL "
                                           r"and TOGETHER_API_KEY\)$"):
        parse_spec("openai-compatible/together/m", (), {"TOGETHER_API_KEY": KEY})
    # openai-compatible/'s own variable names no service: a LiteLLM proxy's `openai/gpt-4o` stays that model
    spec = parse_spec("openai-compatible/openai/gpt-4o", (), {"OPENAI_BASE_URL": "http://proxy:4000"})
    assert (spec.model, spec.service) == ("openai/gpt-4o", None)
    # the service form: the rest of the name is the model, slashes and all; `-` and `.` become `_`
    spec = parse_spec("openai-compatible/deep-infra.com/meta-llama/Llama-3.2-11B-Vision-Instruct", (),
                      {"DEEP_INFRA_COM_BASE_URL": "https://api.deepinfra.example/v1/openai"})
    assert (spec.label, spec.service) == ("openai-compatible/meta-llama/Llama-3.2-11B-Vision-Instruct", "deep-infra.com")
    assert api_key_for(spec, {"DEEP_INFRA_COM_API_KEY": "d"}) == "d"
    # vllm/ has no service form
    assert parse_spec("vllm/together/m", (), env).model == "together/m"


def test_a_service_url_with_a_query_is_refused_naming_its_variable():
    with pytest.raises(EvalkitError, match=r"^TOGETHER_BASE_URL \('https://h/v1\?…'\) has a query string") as e:
        parse_spec("openai-compatible/together/m", (), {"TOGETHER_BASE_URL": "https://h/v1?key=secret"})
    assert "secret" not in str(e.value)


# ---- (d) the reasoning switch is OpenAI's --------------------------------------------------------------------


def test_reasoning_effort_goes_as_openais_field(tmp_path, clean_env, bodies, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 3, seed=7)
    with service_sim(data) as sim:
        clean_env.setenv("TOGETHER_API_KEY", KEY)
        clean_env.setenv("TOGETHER_BASE_URL", sim.url)
        res = evalkit.run("mcq", "openai-compatible/together/some-model", data=str(data), out=str(tmp_path / "run"),
                          no_cache=True, progress=False, reasoning_effort="low")
    assert res.exit_code == 0 and len(bodies) == 3
    assert all(b["reasoning_effort"] == "low" and "chat_template_kwargs" not in b for b in bodies)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["config"]["generation_sent"]["reasoning_effort"] == "low"
    with pytest.raises(EvalkitError, match="--thinking-budget"):  # no budget: refused before anything is written
        evalkit.run("mcq", "openai-compatible/together/some-model", data=str(data), out=str(tmp_path / "b"),
                    no_cache=True, progress=False, thinking_budget=1024)
    assert not (tmp_path / "b").exists()
