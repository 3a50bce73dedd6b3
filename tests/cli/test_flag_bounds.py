"""Every numeric flag is checked for its meaning before anything is written or sent: one line naming
the flag, exit 2 (0.1.0 ran the whole set for --limit 0, dropped the tail for --limit -3, and crashed
with a traceback for --concurrency 0, --rpm 0 or a NaN)."""

from __future__ import annotations

import pytest
from cli_under_test import run_cli
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run

BAD = [
    (["--limit", "0"], "--limit must be at least 1"),
    (["--limit", "-3"], "--limit must be at least 1"),
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--rpm", "0"], "--rpm must be more than 0"),
    (["--tpm", "-5"], "--tpm must be more than 0"),
    (["--timeout", "0"], "--timeout must be more than 0"),
    (["--max-attempts", "0"], "--max-attempts must be at least 1"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["--temperature", "nan"], "--temperature must be a finite number"),
    (["--temperature", "-1"], "--temperature must be at least 0"),
    (["--extra", '{"top_k": NaN}'], "--extra: top_k is not a finite number"),
    (["--max-cost", "inf"], "--max-cost must be a finite number"),
]


@pytest.mark.parametrize(("flags", "message"), BAD, ids=[" ".join(f) for f, _ in BAD])
def test_a_meaningless_flag_value_is_one_line_and_exit_2(tmp_path, flags, message):
    data = make_mcq_jsonl(tmp_path / "ds", 3)
    done = run_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9", "--data",
                    str(data), "--out", str(tmp_path / "run"), "--no-progress", "--cache-dir", str(tmp_path / "c"),
                    *flags])
    err = done.stderr.strip()
    assert done.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    assert message in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "c").exists()


def test_the_python_api_checks_the_same_bounds(tmp_path):
    with pytest.raises(EvalkitError, match="--limit must be at least 1, not 0"):
        run("mcq", "vllm/sim-model", base_url="http://127.0.0.1:9", limit=0, out=str(tmp_path / "run"))
    with pytest.raises(EvalkitError, match="--td-boot must be at least 1"):
        run("tdbench", "vllm/sim-model", base_url="http://127.0.0.1:9", td_boot=0, out=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
