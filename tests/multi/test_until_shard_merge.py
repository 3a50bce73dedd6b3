"""`--until-ci` under `--shard K/N`, and `evalkit merge` (issue 46, item 3): each shard stops on its own
interval; the merge recomputes the merged run's "sample" block from the shards' records (the shards as
strata, each in its shard's seeded order, α split over them); shards that asked their whole
part merge into a run with no block.

The expected interval is computed here from the records through the public statistics
(evalkit.metrics.analysis.confseq and the seeded order of docs/stopping.md), not read back from the code
under test."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from synthetic_data import tiny_mcq_set, tiny_tdbench_set

import evalkit
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

ENV = {"OPENAI_API_KEY": "sk-test"}


N = 360
W = 20.0  # points


def _run(data: Path, sim: SimThread, out: Path, **kw):
    return evalkit.run("mcq", "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV, out=str(out),
                       progress=False, cache_dir=str(out.parent / "cache"), plots=False, **kw)


def _in_shard(item_id: str, k: int, n: int) -> bool:
    """The documented shard rule (docs: `--shard K/N` holds the items whose sha256 mod N is K-1)."""
    return int.from_bytes(hashlib.sha256(item_id.encode()).digest()[:8], "big") % n == k - 1


def _expected_interval(data: Path, shards: dict[int, Path], blocks: dict[int, dict], *, width: float,
                       members: int = 1, macro: bool = False) -> tuple[float, float]:
    """The merged interval (points) from the shards' records: one ConfSeq over the shards (shard ×
    category for a macro headline), each stratum fed its answered prefix in its shard's seeded order with its shard's bets. A group is
    answered once its `members` queries all have a record; its value is 1 when every one is right (the
    headline's per-group value here: plain accuracy, or TDBench's RE). Weights N_h / N, or for a macro
    headline (the mean over categories) 1/C per category shared by the shards by size."""
    from dataclasses import replace

    from evalkit.engine.until.order import sample_order
    from evalkit.metrics.analysis.confseq import ConfSeq

    rows = [json.loads(x) for x in data.read_text().splitlines()]
    sizes, feeds, category_of = {}, {}, {}
    for k, run_dir in shards.items():
        seen: dict[str, list[bool]] = {}
        for line in (run_dir / "records.jsonl").read_text().splitlines():
            r = json.loads(line)
            seen.setdefault(r["base_id"], []).append(r.get("correct") is True)
        right = {g: float(all(v)) for g, v in seen.items() if len(v) == members}
        mine = [SimpleNamespace(base_id=x["id"], category=x["category"]) for x in rows if _in_shard(x["id"], k, 2)]
        order = sample_order(mine, blocks[k]["seed"])
        # a shard's whole order is one stream (its prefixes are simple random samples of its part); a
        # macro headline reads each of its categories as a stream of its own
        streams = {f"{k}/2 · {c}": (c, gs) for c, gs in order.strata.items()} if macro else \
            {f"{k}/2": ("", order.sequence)}
        for name, (category, groups) in streams.items():
            sizes[name], category_of[name] = len(groups), category
            prefix = []
            for g in groups:
                if g not in right:
                    break
                prefix.append(right[g])
            feeds[name] = prefix
    if macro:
        per_category = {c: sum(n for m, n in sizes.items() if category_of[m] == c) for c in set(category_of.values())}
        weights = {m: n / per_category[category_of[m]] / len(per_category) for m, n in sizes.items()}
    else:
        weights = {m: n / sum(sizes.values()) for m, n in sizes.items()}
    cs = ConfSeq(sizes=sizes, alpha=0.05, weights=weights)
    for name, xs in feeds.items():
        for x in xs:
            cs = replace(cs, target=width / 100).update(name, x)
    lo, hi = cs.interval()
    return lo * 100, hi * 100


@pytest.fixture
def data(tmp_path):
    return tiny_mcq_set(tmp_path / "ds", N, 11)


def test_shards_stop_on_their_own_interval_and_merge_recomputes_it(data, tmp_path):
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.7, seed=4))) as sim:
        shards = {k: tmp_path / f"shard{k}" for k in (1, 2)}
        results = {k: _run(data, sim, d, shard=f"{k}/2", until_ci=W) for k, d in shards.items()}
        blocks = {}
        for k, res in results.items():
            block = res.summary["sample"]
            assert res.exit_code == 0 and res.summary["stopped"] == "sample"
            assert block["half_width"] <= W and block["items"] < block["of"]  # stopped early, on its own interval
            assert block["of"] == sum(_in_shard(json.loads(x)["id"], k, 2) for x in data.read_text().splitlines())
            blocks[k] = block
        merged = evalkit.merge([str(d) for d in shards.values()], tmp_path / "merged", plots=False)
        block = merged.summary["sample"]
        assert merged.exit_code == 0 and merged.summary["stopped"] == "sample"
        assert block["items"] == blocks[1]["items"] + blocks[2]["items"]
        assert block["of"] == blocks[1]["of"] + blocks[2]["of"] == N
        assert block["asked"] == blocks[1]["asked"] + blocks[2]["asked"]
        lo, hi = _expected_interval(data, shards, blocks, width=W)
        assert block["interval"] == pytest.approx([lo, hi], abs=1e-6)
        assert block["half_width"] == pytest.approx((hi - lo) / 2, abs=1e-6)
        # alpha over the 2 shards' streams
        assert block["half_width"] > 0 and set(block["strata"]) == {"1/2", "2/2"}
        first = (tmp_path / "merged" / "report.md").read_text().splitlines()[0]
        assert first == (f"stopped at {block['items']:,} of {N:,} items: ±{block['half_width']:.1f} points "
                         f"(95 %; asked ±{W:g})")

        # evalkit report of the merged run keeps its block (its strata are the shards)
        from evalkit.cli import main

        assert main(["report", str(tmp_path / "merged")]) == 0
        again = json.loads((tmp_path / "merged" / "summary.json").read_text())
        assert again["sample"] == block and again["stopped"] == "sample"
        assert (tmp_path / "merged" / "report.md").read_text().splitlines()[0] == first

        # a partial merge is an incomplete run, not a sample of the whole set
        partial = evalkit.merge([str(shards[1])], tmp_path / "partial", partial=True, plots=False)
        assert partial.exit_code == 1 and not partial.summary.get("sample")

        # each shard completed by its own command without the flag: the merged run is whole, no block
        for k, d in shards.items():
            assert _run(data, sim, d, shard=f"{k}/2").summary["missing"] == 0
        whole = evalkit.merge([str(d) for d in shards.values()], tmp_path / "merged", plots=False)
        assert whole.exit_code == 0 and whole.summary["complete"] and not whole.summary.get("sample")
        assert not (tmp_path / "merged" / "report.md").read_text().startswith("stopped at")
        assert sim.counters.snapshot()["completions"] == N  # nothing asked twice


def test_a_macro_headline_weighs_each_category_equally_across_shards(tmp_path):
    """TDBench's RE is the mean over categories: the merged strata share each category's 1/C by size."""
    data = tiny_tdbench_set(tmp_path / "ds", 300, unequal=True)
    key = answer_key_for("tdbench", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.8, seed=4))) as sim:
        shards = {k: tmp_path / f"shard{k}" for k in (1, 2)}
        out = {k: evalkit.run("tdbench", "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV,
                              out=str(d), progress=False, cache_dir=str(tmp_path / "cache"), plots=False,
                              shard=f"{k}/2", until_ci=30) for k, d in shards.items()}
        merged = evalkit.merge([str(d) for d in shards.values()], tmp_path / "merged", plots=False)
    blocks = {k: r.summary["sample"] for k, r in out.items()}
    block = merged.summary["sample"]
    assert all(b["items"] < b["of"] for b in blocks.values()) and block["items"] == sum(b["items"] for b in
                                                                                        blocks.values())
    lo, hi = _expected_interval(data, shards, blocks, width=30, members=4, macro=True)
    assert [v * 100 for v in block["interval"]] == pytest.approx([lo, hi], abs=1e-4)  # RE is a fraction: scale 1
