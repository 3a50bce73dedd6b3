"""A base URL that urlsplit cannot parse (`http://[::1`, a port out of range) is one line at setup, exit 2.

urlsplit raises ValueError("Invalid IPv6 URL") on an unclosed bracket: `--base-url 'http://[::1'`
was a traceback from the setup check, and the same URL as `--judge-base-url` of `report`, or
`--base-url` of `translate`, a traceback from deeper in. Every bad URL is now refused where the
others are, naming the flag of the model it belongs to, before anything is written or sent.
"""

from __future__ import annotations

import pytest
from cli_under_test import run_main
from run_factory import make_run, record
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.providers import parse_spec
from evalkit.providers.preflight import check_setup

BAD = "http://[::1"
SAID = f"base URL '{BAD}' is not a valid URL (Invalid IPv6 URL; e.g. http://127.0.0.1:8000/v1)"


def _one_line(proc, flag: str) -> None:  # noqa: ANN001
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"evalkit: error: {flag}: {SAID}"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_mcq_jsonl(tmp_path_factory.mktemp("ds"), 2, seed=1)


def test_run_refuses_the_model_url(data, tmp_path):
    out = tmp_path / "run"
    proc = run_main(["run", "mcq", "--model", "vllm/m", "--base-url", BAD, "--data", str(data), "--out", str(out),
                    "--no-cache", "--no-progress"], env={"VLLM_API_KEY": "k"})
    _one_line(proc, "--model vllm/m")
    assert not out.exists()


def test_run_refuses_the_judge_url(data, tmp_path):
    proc = run_main(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--judge", "vllm/j",
                    "--judge-base-url", BAD, "--data", str(data), "--out", str(tmp_path / "run"), "--no-cache",
                    "--no-progress"], env={"VLLM_API_KEY": "k"})
    _one_line(proc, "--judge vllm/j")


def test_a_provider_url_from_the_environment_is_checked_alike(data, tmp_path):
    proc = run_main(["run", "mcq", "--model", "anthropic/claude-x", "--data", str(data), "--out", str(tmp_path / "r"),
                    "--no-cache", "--no-progress"], env={"ANTHROPIC_BASE_URL": BAD, "ANTHROPIC_API_KEY": "k"})
    _one_line(proc, "--model anthropic/claude-x")


def test_report_refuses_the_judge_url(tmp_path):
    run = make_run(tmp_path / "run", "m", [record("q1", True), record("q2", False)])
    proc = run_main(["report", str(run), "--judge", "vllm/j", "--judge-base-url", BAD], env={"VLLM_API_KEY": "k"})
    _one_line(proc, "--judge vllm/j")


def test_translate_refuses_the_editor_url(tmp_path):
    (tmp_path / "ir").mkdir()
    proc = run_main(["translate", "if-bench", "--images", str(tmp_path / "ir"), "--out", str(tmp_path / "out"),
                    "--model", "openai/gpt-image-1", "--base-url", BAD, "--no-progress"], env={"OPENAI_API_KEY": "k"})
    _one_line(proc, "--model openai/gpt-image-1")


@pytest.mark.parametrize(("url", "cause"), [(BAD, "Invalid IPv6 URL"), ("http://[::1]:99999/v1", "Port out of range"),
                                            ("http://h:8o8o/v1", "Port could not be cast")])
def test_check_setup_names_the_cause(url, cause):
    with pytest.raises(EvalkitError, match=rf"^--model vllm/m: base URL '.*' is not a valid URL \({cause}"):
        check_setup(parse_spec("vllm/m", (url,), {}), sdk=False)
    check_setup(parse_spec("vllm/m", ("http://[::1]:8000/v1",), {}), sdk=False)  # a sound IPv6 URL passes
