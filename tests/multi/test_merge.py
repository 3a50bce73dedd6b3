"""`evalkit merge`: the shards of one run made into one ordinary run directory that equals the unsharded run
(metrics, interval, record order), that the unsharded command finds complete (0 requests), and that compare,
report and view read; missing shards and shards of different runs refused (exit 2, named); an incomplete
shard merged and marked (exit 1), --partial (exit 1); a shard killed mid-run asks only what it had not
recorded when re-run (issue 32 item 5)."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from cli_under_test import start_cli
from synthetic_data import make_mcq_jsonl
from waiting import wait_for_lines, wait_until_held, wait_until_idle

from evalkit.cli import main
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

N_ITEMS = 60  # one query each, in 3 shards (circular variants staying whole: test_shards.py; a circular run here
# would spend seconds per shard fitting its reliability model)
SHARDS = ("1/3", "2/3", "3/3")


def _ids(out: Path) -> list[str]:
    return [json.loads(x)["query_id"] for x in (out / "records.jsonl").read_text().splitlines()]


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


class World:
    """One data set, one simulated server, its three shards and the unsharded run (no cache: asked apart)."""

    def __init__(self, root: Path, sim: SimThread) -> None:
        self.root, self.sim = root, sim
        self.data = make_mcq_jsonl(root / "ds", N_ITEMS, seed=7)
        self.shard_dirs = {k: self.shard(k) for k in SHARDS}
        self.whole = run("mcq", "vllm/sim-model", data=str(self.data), base_url=sim.url,
                         out=str(root / "whole"), no_cache=True, progress=False, plots=False)

    def argv(self, out: Path, *extra: str) -> list[str]:
        return ["run", "mcq", "--model", "vllm/sim-model", "--data", str(self.data), "--base-url", self.sim.url,
                "--out", str(out), "--cache-dir", str(self.root / "cache"), "--no-progress",
                "--no-plots", "--concurrency", "4", *extra]

    def shard(self, k: str, name: str = "shard", **kw) -> Path:
        out = self.root / f"{name}-{k.replace('/', '-')}"
        res = run("mcq", "vllm/sim-model", data=str(self.data), base_url=self.sim.url, shard=k,
                  out=str(out), cache_dir=str(self.root / "cache"), progress=False, plots=False, **kw)
        assert res.exit_code == 0
        return out

    def copies(self, where: Path) -> dict[str, Path]:
        """The shards' run directories copied (a test that alters one leaves the others' intact)."""
        return {k: Path(shutil.copytree(p, where / p.name)) for k, p in self.shard_dirs.items()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("merge")
    data = make_mcq_jsonl(root / "ds", N_ITEMS, seed=7)
    key = answer_key_for("mcq", {"data": str(data)})
    params = SimParams(theta=0.7, r=0.85, g=0.25, seed=3, style="mixed")  # a fallible model: equality means something
    with SimThread(SimConfig(answer_key=key, params=params)) as sim:
        yield World(root, sim)


def merge_cli(dirs, out: Path, *extra: str) -> int:
    return main(["merge", *map(str, dirs), "--out", str(out), "--no-plots", *extra])


def test_merge_equals_the_unsharded_run_and_the_unsharded_command_sends_nothing(world, tmp_path, capsys):
    out = tmp_path / "merged"
    assert merge_cli(world.shard_dirs.values(), out) == 0
    merged, whole = _summary(out), world.whole.summary
    assert 30 < whole["metrics"]["accuracy"] < 95  # answers differ per query: equal metrics mean something
    assert merged["metrics"] == whole["metrics"] and merged["counts"] == whole["counts"]
    assert merged["headline"] == whole["headline"]  # the bootstrap interval too: same records, same order
    assert _ids(out) == _ids(world.root / "whole") and len(set(_ids(out))) == N_ITEMS  # one record per query
    assert merged["complete"] and merged["n_items"] == N_ITEMS and merged["n_queries"] == N_ITEMS
    assert merged["merge"]["missing_shards"] == [] and merged["merge"]["incomplete_shards"] == []
    assert merged["data_source"] == whole["data_source"] and merged["data_source"]["kind"] == "local"
    config = json.loads((out / "config.json").read_text())
    assert config["identity"] == json.loads((world.root / "whole" / "config.json").read_text())["identity"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data_source"]["files"] and manifest["data_sha256"] == config["identity"]["data_sha256"]
    assert "shard" not in config["identity"] and "shard" not in config["config"]
    assert (out / "report.md").is_file()
    # the unsharded command on the merged directory: complete, nothing sent (no cache: the records alone)
    before = world.sim.counters.snapshot()["requests"]
    assert main(world.argv(out, "--no-cache")) == 0
    assert world.sim.counters.snapshot()["requests"] == before
    assert _summary(out)["metrics"] == whole["metrics"]
    # compare, report and view read it as a run
    assert main(["report", str(out)]) == 0 and _summary(out)["metrics"] == whole["metrics"]
    assert main(["compare", str(out), str(world.root / "whole"), "--out", str(tmp_path / "cmp"), "--n-boot", "50"]) == 0
    assert main(["view", str(out), "--out", str(tmp_path / "view")]) == 0
    capsys.readouterr()


def test_a_missing_shard_is_named_and_nothing_is_written(world, tmp_path, capsys):
    out = tmp_path / "merged"
    assert merge_cli([world.shard_dirs["1/3"], world.shard_dirs["3/3"]], out) == 2
    err = capsys.readouterr().err
    assert "missing shard 2 of 3" in err and "--partial" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_shards_of_different_runs_are_refused_naming_what_differs(world, tmp_path, capsys):
    other = world.shard("2/3", name="limit20", limit=20)  # a shard of another run: --limit 20
    assert merge_cli([world.shard_dirs["1/3"], other, world.shard_dirs["3/3"]], tmp_path / "m") == 2
    err = capsys.readouterr().err
    assert "shards of different runs" in err and "limit" in err  # (and data_sha256: fewer items' images)
    split = world.shard("2/4", name="split")  # a shard of the same run split in four
    assert merge_cli([world.shard_dirs["1/3"], split], tmp_path / "m") == 2
    assert "different splits" in capsys.readouterr().err
    assert merge_cli([world.shard_dirs["1/3"], world.root / "whole"], tmp_path / "m") == 2  # not a shard
    assert "is not a shard" in capsys.readouterr().err
    assert merge_cli([world.shard_dirs["1/3"], world.shard_dirs["1/3"]], tmp_path / "m") == 2
    assert "given twice" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_an_incomplete_shard_is_merged_and_marked_and_partial_says_so(world, tmp_path, capsys):
    shards = world.copies(tmp_path)
    records = shards["2/3"] / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[:-5]))  # a shard stopped before its last five answers
    (shards["2/3"] / "summary.json").unlink()
    out = tmp_path / "merged"
    assert merge_cli(shards.values(), out) == 1
    summary = _summary(out)
    assert not summary["complete"] and summary["missing"] == 5 and summary["merge"]["incomplete_shards"] == [2]
    assert "shard 2/3" in capsys.readouterr().err
    assert len(_ids(out)) == N_ITEMS - 5
    # --partial: two of three shards, marked and said
    partial = tmp_path / "partial"
    assert merge_cli([shards["1/3"], shards["3/3"]], partial, "--partial") == 1
    err = capsys.readouterr().err
    assert "--partial" in err and "shard 2 of 3" in err
    summary = _summary(partial)
    assert not summary["complete"] and summary["merge"]["missing_shards"] == [2]
    assert summary["missing"] == N_ITEMS - len(_ids(partial))
    # the shard finished (its command re-run: it resumes), then merged again into the same folder: complete
    before = world.sim.counters.snapshot()["completions"]
    assert main(world.argv(shards["2/3"], "--shard", "2/3")) == 0
    assert world.sim.counters.snapshot()["completions"] == before  # its five answers were in the cache
    assert merge_cli(shards.values(), out) == 0 and _summary(out)["metrics"] == world.whole.summary["metrics"]


def test_a_shard_killed_mid_run_asks_only_what_it_had_not_recorded(world, tmp_path):
    out = tmp_path / "shard-2"
    argv = [*world.argv(out, "--shard", "2/3")]
    argv[argv.index("--cache-dir") + 1] = str(tmp_path / "cache")  # its own cache: every answer is asked
    total = _summary(world.shard_dirs["2/3"])["n_queries"]
    sim = world.sim
    start = sim.counters.snapshot()["completions"]
    sim.hold(after=10)  # ten replies go, the rest wait: the run cannot end before the kill
    proc = start_cli(argv)
    try:
        wait_until_held(sim, proc, 1)
        wait_for_lines(out / "records.jsonl", 10, proc)  # the ten answers recorded
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        sim.release()
        proc.communicate()
    wait_until_idle(sim)  # the held requests answered (to nobody): the counters are final
    done = (out / "records.jsonl").read_text().count("\n")
    assert done == 10
    before = sim.counters.snapshot()
    assert main(argv) == 0
    after = sim.counters.snapshot()
    assert after["completions"] - before["completions"] == total - done  # only what it had not recorded
    assert before["completions"] - start >= 10
    assert merge_cli([world.shard_dirs["1/3"], out, world.shard_dirs["3/3"]], tmp_path / "m") == 0
    assert _summary(tmp_path / "m")["metrics"] == world.whole.summary["metrics"]
