"""`--shard K/N`: a stable partition of the items (every query in exactly one shard, every variant of an item
with it), the flag's bad values, the identity gaining `shard` only when sharded, and a sharded `--batch`
run submitting one batch per shard (issue 32 items 5 and 6)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.benchmarks import benchmark_class
from evalkit.benchmarks.prepare import prepare
from evalkit.cli import main
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig, build
from evalkit.core.shard import Shard, parse_shard, shard_index
from evalkit.engine.evaluate import run
from evalkit.multi.merge import merge
from evalkit.rundir.identity import run_identity
from evalkit.rundir.layout import default_run_dir
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def test_the_shard_of_an_item_is_sha256_of_its_id_pinned():
    """Not Python's hash() (salted per process): the same on every machine and in every release, so a
    shard re-run anywhere asks the same items (int.from_bytes(sha256(id)[:8], "big") % N)."""
    assert [shard_index(f"q{i:05d}", 4) for i in range(8)] == [3, 0, 3, 3, 0, 1, 1, 2]
    assert {shard_index(f"q{i:05d}", 1) for i in range(8)} == {0}
    assert Shard(4, 4).holds("q00000") and not Shard(1, 4).holds("q00000")


@pytest.mark.parametrize("value, k, n", [("1/1", 1, 1), ("2/4", 2, 4), (" 4 / 4 ", 4, 4), ("10/12", 10, 12)])
def test_good_shard_values(value, k, n):
    assert parse_shard(value) == Shard(k, n)
    assert build(RunConfig, {"model": "vllm/m", "shard": value}).shard == f"{k}/{n}"  # the identity's spelling


@pytest.mark.parametrize("value", ["0/4", "5/4", "2/0", "0/0", "-1/4", "2", "a/b", "2/4/8", "", "1.5/4"])
def test_bad_shard_values_are_one_line_naming_the_flag(value, capsys):
    with pytest.raises(EvalkitError, match="--shard"):
        parse_shard(value)
    code = main(["run", "mcq", "--model", "vllm/m", "--data", "sample", f"--shard={value}", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("evalkit: error: --shard") and "\n" not in err, err


def _queries(data, **opts):
    return prepare("mcq", {"data": str(data), "circular": True, **opts}).queries


def test_shards_partition_the_queries_and_keep_each_items_variants_together(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 60, seed=1)
    whole = _queries(data, limit=50)  # --limit first, then the shards: they partition exactly this run
    assert len(whole) == 200
    parts = {k: _queries(data, limit=50, shard=f"{k}/3") for k in (1, 2, 3)}
    ids = Counter(q.id for part in parts.values() for q in part)
    assert set(ids) == {q.id for q in whole} and set(ids.values()) == {1}  # every query in exactly one shard
    for k, part in parts.items():
        assert part and [q.id for q in part] == [q.id for q in whole if q.id in {p.id for p in part}]  # same order
        items = {q.item_id for q in part}
        assert all(shard_index(i, 3) == k - 1 for i in items)
        # all four circular shifts of each of its items: the circular metric stays whole
        assert Counter(q.item_id for q in part) == {i: 4 for i in items}
    assert sum(len({q.item_id for q in p}) for p in parts.values()) == 50
    assert _queries(data, limit=50, shard="1/1") == whole


def test_the_identity_gains_shard_only_when_sharded():
    """(Unsharded identities are pinned by test_identity.py; cache keys never see the shard.)"""
    def identity(**kw):
        cfg = build(RunConfig, {"model": "vllm/m", **kw})
        return run_identity("mcq", benchmark_class("mcq").Options(), cfg, "vllm/m", "http://h/v1", "abc")

    plain, sharded = identity(), identity(shard="2/4")
    assert "shard" not in plain and sharded == {**plain, "shard": "2/4"}
    assert default_run_dir("mcq", "vllm/m", plain) != default_run_dir("mcq", "vllm/m", sharded)
    assert identity(shard=" 2 / 4") == sharded


ENV = {"OPENAI_API_KEY": "sk-test"}


def test_a_sharded_batch_run_submits_one_batch_per_shard(tmp_path):
    """Item 6: each shard's run submits its own queries as one batch; the merge reads them like live answers."""
    data = make_mcq_jsonl(tmp_path / "ds", 12, seed=4)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        outs = []
        for k in (1, 2):
            before = dict(sim.batches.counts)
            res = run("mcq", "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV, batch=True,
                      shard=f"{k}/2", out=str(tmp_path / f"s{k}"), cache_dir=str(tmp_path / "cache"),
                      progress=False, plots=False)
            asked = res.summary["n_queries"]
            assert res.exit_code == 0 and asked == [5, 7][k - 1]  # (shard_index of q00000..q00011 among 2)
            counts = sim.batches.counts
            assert counts["batches"] - before.get("batches", 0) == 1  # one batch for the shard's queries
            assert counts["lines"] - before.get("lines", 0) == asked
            assert res.summary["batches"]["n_batches"] == 1
            outs.append(res.out_dir)
        merged = merge(outs, tmp_path / "merged", plots=False)
        assert merged.exit_code == 0 and merged.summary["n_queries"] == 12
        assert merged.summary["metrics"]["accuracy"] == 100.0
        assert {json.loads(x)["via"] for x in (tmp_path / "merged" / "records.jsonl").read_text().splitlines()} \
            == {"batch"}
