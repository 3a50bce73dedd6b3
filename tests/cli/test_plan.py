"""`evalkit plan` (issue 46, item 4): before anything is sent, the items, requests, tokens and dollars to
reach ±W points or to tell models D points apart, for each model, from the dry run's pricing.

Driven through the `evalkit` command in this process (evalkit.cli.main), on data written here, with
models the built-in price table knows (a dry run needs no key and sends nothing). The expected figures
are computed here from the textbook formulas and from a real `--dry-run` of the same data.
"""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from statistics import NormalDist

import pytest
from PIL import Image

MODEL_A, MODEL_B, MODEL_C = "openai/gpt-4o", "openai/gpt-4.1", "openai/gpt-4o-mini"


def mcq_set(folder: Path, n: int) -> Path:
    """n four-option questions in three categories (667/667/666 for 2,000), on a few small images."""
    (folder / "images").mkdir(parents=True)
    for k in range(4):
        Image.new("RGB", (64 + 16 * k, 48), (60 * k, 90, 200)).save(folder / "images" / f"{k}.png")
    rows = [{"id": f"q{i:05d}", "image": f"images/{i % 4}.png", "question": f"Which colour is shown ({i})?",
             "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"}, "answer": "ABCD"[i % 4],
             "category": f"cat{i % 3}"} for i in range(n)]
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def evalkit(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """`evalkit ARGS` in this process: (exit code, stdout, stderr)."""
    from evalkit.cli import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Any connection a plan tries is recorded and refused."""
    tried: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        tried.append(address)
        raise OSError("a plan must not connect anywhere")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tried


def wald_fpc(p: float, w: float, n: int) -> int:
    z = NormalDist().inv_cdf(0.975)
    n0 = z * z * p * (1 - p) / (w * w)
    return math.ceil(n0 / (1 + (n0 - 1) / n) - 1e-9)


def mcnemar(d: float, psi: float, alpha: float, power: float) -> int:
    z = NormalDist().inv_cdf
    return math.ceil((z(1 - alpha / 2) * math.sqrt(psi) + z(power) * math.sqrt(psi - d * d)) ** 2 / (d * d) - 1e-9)


def test_plan_to_a_width_prices_the_fixed_and_sequential_designs_from_the_dry_run(tmp_path, monkeypatch, capsys,
                                                                                  no_network):
    data = mcq_set(tmp_path / "ds", 2000)
    monkeypatch.chdir(tmp_path)
    code, out, err = evalkit(capsys, "plan", "mcq", "--data", data, "--model", MODEL_A, "--width", 3, "--json",
                             "--sim-runs", 200)
    assert code == 0, err
    plan = json.loads(out)
    design = plan["design"]
    assert plan["items"] == 2000 and plan["strata"] == {"cat0": 667, "cat1": 667, "cat2": 666}
    assert design["accuracy"] == 0.6 and design["accuracy_source"] == "assumed"
    fixed_n = wald_fpc(0.6, 0.03, 2000)  # 678 of 2,000 (1,025 without the correction)
    assert design["fixed"]["items"] == fixed_n == 678
    median = design["sequential"]["median_items"]
    assert fixed_n <= median <= 2000, median
    assert design["sequential"]["runs"] == 200 and design["sequential"]["first_look"] <= 50

    from evalkit import run  # the dry run of the same command: its per-request estimate

    dry = run("mcq", MODEL_A, data=str(data), dry_run=True, quiet=True, progress=False).summary["dry_run"]
    assert dry["to_send"] == dry["n_queries"] == 2000
    per_low, per_high = dry["cost_low_usd"] / dry["to_send"], dry["cost_high_usd"] / dry["to_send"]
    [row] = plan["models"]
    assert row["model"] == MODEL_A and row["service_tier"] == "standard"
    rows = row["plans"]
    assert [rows[k]["items"] for k in ("fixed", "sequential", "whole")] == [fixed_n, median, 2000]
    for r in rows.values():
        assert r["requests"] == r["items"] * 1  # one variant per item, one repeat
        for kind in ("paid", "list"):  # nothing cached: paid now = list price
            assert r[f"{kind}_low_usd"] == pytest.approx(per_low * r["requests"], rel=1e-9)
            assert r[f"{kind}_high_usd"] == pytest.approx(per_high * r["requests"], rel=1e-9)
        assert r["input_tokens"] == round(dry["input_tokens"] * r["items"] / 2000)
    assert rows["whole"]["list_high_usd"] == pytest.approx(dry["cost_high_usd"])
    assert rows["sequential"]["list_high_usd"] < rows["whole"]["list_high_usd"]
    assert plan["sent"] == 0 and no_network == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no runs/, no cache/


def test_plan_to_an_effect_quotes_mcnemar_and_the_sequential_median_below_it(tmp_path, capsys, no_network):
    data = mcq_set(tmp_path / "ds", 600)
    code, out, err = evalkit(capsys, "plan", "mcq", "--data", data, "--model", MODEL_A, "--model", MODEL_B,
                             "--effect", 10, "--json", "--cache-dir", tmp_path / "cache")
    assert code == 0, err
    design = json.loads(out)["design"]
    assert design["discordance"] == 0.30 and design["discordance_source"] == "default"
    assert design["pairs"] == 1 and design["holm"] is None
    assert design["fixed"]["items"] == mcnemar(0.10, 0.30, 0.05, 0.8) == 234  # 233.1 rounded up
    median = design["sequential"]["median_items"]
    assert 150 <= median < 234, median  # measured over 2,000 runs: 188
    assert design["sequential"]["decided_by_the_whole_set"] > 0.9
    assert median <= design["sequential"]["power_items"] <= 600

    # three models: Holm over three pairs, each pair planned at α/3; the text says so, and ψ "(default)"
    code, out, err = evalkit(capsys, "plan", "mcq", "--data", data, "--model", MODEL_A, "--model", MODEL_B,
                             "--model", MODEL_C, "--effect", 10, "--power", 0.9, "--cache-dir", tmp_path / "cache")
    assert code == 0, err
    assert "ψ 0.300 (default)" in out and "Holm over 3 pairs" in out
    fixed3 = mcnemar(0.10, 0.30, 0.05 / 3, 0.9)
    assert f"fixed design (McNemar (Connor 1987)): {fixed3:,} paired items" in out
    assert out.count(" · standard") == 3 and no_network == []  # a table per model


def _records(run_dir: Path, right: dict[str, bool], model: str) -> None:
    run_dir.mkdir()
    lines = [{"query_id": item, "item_id": item, "base_id": item, "variant": {}, "model": model,
              "request_key": f"{model}-{item}", "response": "A", "gold": "A" if ok else "B", "parsed": "A",
              "correct": ok} for item, ok in right.items()]
    (run_dir / "records.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def test_plan_reads_the_discordance_from_two_runs(tmp_path, capsys):
    data = mcq_set(tmp_path / "ds", 400)
    a = {f"q{i:05d}": i % 2 == 0 for i in range(300)}  # A right on even items
    b = {f"q{i:05d}": i % 3 == 0 for i in range(100, 400)}  # B right on multiples of 3; 200 items shared
    _records(tmp_path / "run-a", a, MODEL_A)
    _records(tmp_path / "run-b", b, MODEL_B)
    shared = a.keys() & b.keys()
    psi = sum(a[i] != b[i] for i in shared) / len(shared)
    assert len(shared) == 200 and 0.4 < psi < 0.6
    code, out, err = evalkit(capsys, "plan", "mcq", "--data", data, "--model", MODEL_A, "--model", MODEL_B,
                             "--effect", 10, "--runs", tmp_path / "run-a", tmp_path / "run-b", "--json",
                             "--cache-dir", tmp_path / "cache")
    assert code == 0, err
    design = json.loads(out)["design"]
    assert design["discordance"] == pytest.approx(psi)
    assert "200 items both answered" in design["discordance_source"]
    assert design["fixed"]["items"] == mcnemar(0.10, psi, 0.05, 0.8)

    _records(tmp_path / "run-c", {f"x{i}": True for i in range(10)}, MODEL_B)
    code, out, err = evalkit(capsys, "plan", "mcq", "--data", data, "--model", MODEL_A, "--model", MODEL_B,
                             "--effect", 10, "--runs", tmp_path / "run-a", tmp_path / "run-c")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "share no answered items" in err and "run-a" in err and "run-c" in err


@pytest.mark.parametrize(("args", "named"), [
    (["--width", 2, "--effect", 5], "--width"),
    ([], "--width"),
    (["--width", 0], "--width"),
    (["--width", -1.5], "--width"),
    (["--effect", 5, "--power", 1.2], "--power"),
    (["--effect", 5, "--power", 0], "--power"),
    (["--effect", 40], "--effect"),  # more than ψ = 0.30 allows
])
def test_bad_input_is_one_line_naming_the_flag(tmp_path, capsys, args, named):
    code, out, err = evalkit(capsys, "plan", "mcq", "--model", MODEL_A, "--model", MODEL_B, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "plan" in err and named in err, err


def test_an_unknown_benchmark_is_one_line(capsys):
    code, _, err = evalkit(capsys, "plan", "no-such-bench", "--model", MODEL_A, "--width", 2)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "unknown benchmark 'no-such-bench'" in err, err


def test_a_set_not_downloaded_is_planned_offline_from_its_published_size(tmp_path, monkeypatch, capsys, no_network):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty Hub cache: MME-RealWorld is not here
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    code, out, err = evalkit(capsys, "plan", "mme-realworld", "--model", MODEL_A, "--width", 2, "--json",
                             "--sim-runs", 100)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["items"] == 23_599  # the registry's published count (evalkit/data/registry.toml)
    assert plan["design"]["fixed"]["items"] == wald_fpc(0.6, 0.02, 23_599) == 2_100
    assert any("not here" in note and "23,599" in note for note in plan["notes"])
    whole = plan["models"][0]["plans"]["whole"]
    assert whole["items"] == 23_599 and whole["list_high_usd"] > 0
    assert no_network == [] and sorted(p.name for p in tmp_path.iterdir()) == []  # nothing asked, nothing written


def test_paid_now_leaves_out_what_the_cache_already_holds(tmp_path, monkeypatch, capsys):
    from evalkit import run
    from evalkit.sim.from_bench import answer_key_for
    from evalkit.sim.server import SimConfig, SimThread

    data = mcq_set(tmp_path / "ds", 200)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cache = tmp_path / "cache"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        base = sim.url + "/v1"
        first = run("mcq", MODEL_A, data=str(data), base_url=base, limit=50, cache_dir=str(cache),
                    out=str(tmp_path / "first"), progress=False, plots=False, quiet=True)
        sent = sim.counters.snapshot()["requests"]
        code, out, err = evalkit(capsys, "plan", "mcq", "--data", data, "--model", MODEL_A, "--base-url", base,
                                 "--cache-dir", cache, "--width", 5, "--json", "--sim-runs", 100)
        assert sim.counters.snapshot()["requests"] == sent == 50  # the plan sent nothing
    assert first.exit_code == 0 and code == 0, err
    common = dict(data=str(data), base_url=base, dry_run=True, quiet=True, progress=False)
    now = run("mcq", MODEL_A, cache_dir=str(cache), **common).summary["dry_run"]  # what the dry run says now
    every = run("mcq", MODEL_A, no_cache=True, **common).summary["dry_run"]  # and for every request
    assert (now["to_send"], every["to_send"]) == (150, 200)
    rows = json.loads(out)["models"][0]["plans"]
    whole = rows["whole"]
    assert whole["requests"] == 200
    for kind in ("low", "high"):
        assert whole[f"paid_{kind}_usd"] == pytest.approx(now[f"cost_{kind}_usd"], rel=1e-9)
        assert whole[f"list_{kind}_usd"] == pytest.approx(every[f"cost_{kind}_usd"], rel=1e-9)
        for r in rows.values():  # a sample of n items: n/N of each, the cached share left out of "paid now"
            assert r[f"paid_{kind}_usd"] == pytest.approx(whole[f"paid_{kind}_usd"] * r["items"] / 200, rel=1e-9)
            assert r[f"paid_{kind}_usd"] < r[f"list_{kind}_usd"]
