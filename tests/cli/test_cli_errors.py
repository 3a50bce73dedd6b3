"""Bad input: one line naming the culprit, exit code 2, no traceback; nothing computed is lost."""

from __future__ import annotations

import base64
import io
import json

import pytest
from synthetic_data import draw_image, make_mcq_jsonl

from evalkit.cli import main


def _b64_png(seed: int) -> str:
    buf = io.BytesIO()
    draw_image(seed, 32).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _tsv(path, rows):
    header = "index\timage\tquestion\tA\tB\tC\tD\tanswer\tcategory"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.fixture
def clean_env(monkeypatch):
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VLLM_BASE_URL"):
        monkeypatch.delenv(k, raising=False)


def _check(capsys, argv, *needles):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("evalkit: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_missing_data_file(capsys, tmp_path, clean_env):
    _check(capsys, ["run", "mcq", "--model", "vllm/m", "--data", str(tmp_path / "nope.tsv")], "nope.tsv")


def test_tsv_row_without_answer(capsys, tmp_path, clean_env):
    p = _tsv(tmp_path / "a.tsv", [f"1\t{_b64_png(1)}\tq?\tx\ty\tz\tw\tA\tc", f"2\t{_b64_png(2)}\tq?\tx\ty\tz\tw\t\tc"])
    _check(capsys, ["run", "mcq", "--model", "vllm/m", "--data", str(p)], "a.tsv", "row 2")


def test_answer_not_among_options(capsys, tmp_path, clean_env):
    p = _tsv(tmp_path / "b.tsv", [f"7\t{_b64_png(1)}\tq?\tx\ty\t\t\tC\tc"])
    _check(capsys, ["run", "mcq", "--model", "vllm/m", "--data", str(p)], "b.tsv", "'C'")


def test_unknown_benchmark(capsys, clean_env):
    _check(capsys, ["run", "no-such-bench", "--model", "vllm/m"], "no-such-bench")


def test_unknown_provider(capsys, clean_env):
    _check(capsys, ["run", "mcq", "--model", "acme/m"], "acme")


@pytest.mark.parametrize("spec", ["gpt-4o", "openai/", "/gpt-4o"])
def test_malformed_model(capsys, clean_env, spec):
    _check(capsys, ["run", "mcq", "--model", spec], spec)


def test_missing_api_key(capsys, clean_env):
    _check(capsys, ["run", "mcq", "--model", "openai/gpt-4o"], "OPENAI_API_KEY")


def test_bad_flag_value(capsys, clean_env):
    _check(capsys, ["run", "mcq", "--model", "vllm/m", "--concurrency", "many"], "--concurrency")


def test_corrupt_image_is_that_querys_error_and_the_rest_is_answered(tmp_path, capfd):
    """A corrupt image is that query's data error naming the file (exit 2: a re-run cannot mend it; issue
    31 item 13); every other query is answered and recorded, and nothing is fatal."""
    from evalkit.sim.server import SimConfig, SimThread

    data = make_mcq_jsonl(tmp_path / "ds", 40, seed=1)
    (tmp_path / "ds" / "images" / "img00017.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    with SimThread(SimConfig()) as sim:  # the CLI in this process: its exit code and stderr as a user sees them
        code = main(["run", "mcq", "--model", "vllm/m", "--data", str(data), "--base-url", sim.url,
                     "--out", str(tmp_path / "run"), "--no-cache", "--concurrency", "1", "--no-progress"])
    err = capfd.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    recs = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(recs) == 40
    bad = [r for r in recs if r["error"] is not None]
    assert len(bad) == 1 and bad[0]["error"] == "data" and "img00017.png" in bad[0]["error_message"]
    assert all(r["response"] for r in recs if r["error"] is None)
