"""The reliability fit is kept in the run directory by a hash of what it was fitted on (issue 35 item
8; metrics/fit_store.py): a re-report of unchanged records does not refit it, and a kept fit is never
used for other records, another evalkit, or when the memo is damaged."""

from __future__ import annotations

import asyncio
import json

import pytest

import evalkit.metrics.fit_store as fit_store
import evalkit.metrics.reliability as reliability
from evalkit.engine.evaluate import run
from evalkit.engine.rereport import rereport
from evalkit.metrics.fit_store import FITS, fits_kept_in
from evalkit.metrics.reliability import fit_histogram
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

A = [3, 5, 9, 14, 29]  # groups with 0..4 of 4 variants right
B = [4, 5, 9, 14, 28]  # the same run with one group's answers changed


@pytest.fixture
def fits(monkeypatch):
    """The inputs of every fit computed (not found in the run directory), in-process memo cleared."""
    computed: list[tuple] = []
    real = reliability._fit_memo

    def counted(*inputs):
        computed.append(inputs)
        return real.__wrapped__(*inputs)

    monkeypatch.setattr(reliability, "_fit_memo", counted)
    return computed


def test_a_kept_fit_is_used_for_its_own_inputs_only(tmp_path, fits, monkeypatch):
    with fits_kept_in(tmp_path):
        first = fit_histogram(A, n_boot=3, seed=1)
    assert len(fits) == 1 and len(json.loads((tmp_path / FITS).read_text())) == 1
    with fits_kept_in(tmp_path):
        again = fit_histogram(A, n_boot=3, seed=1)
    assert len(fits) == 1 and again == first and again.as_dict() == first.as_dict()  # not refitted

    with fits_kept_in(tmp_path):  # other records: fitted, and the memo now holds theirs alone
        other = fit_histogram(B, n_boot=3, seed=1)
        assert fit_histogram(A, n_boot=3, seed=2) != first  # another seed is another fit
    assert len(fits) == 3 and len(json.loads((tmp_path / FITS).read_text())) == 2
    assert other == fit_histogram(B, n_boot=3, seed=1) and len(fits) == 4  # (no run directory: computed)

    with monkeypatch.context() as m:  # another evalkit: its own fit
        m.setattr(fit_store, "__version__", "9.9.9")
        with fits_kept_in(tmp_path):
            fit_histogram(B, n_boot=3, seed=1)
    assert len(fits) == 5

    kept = json.loads((tmp_path / FITS).read_text())
    key = next(iter(kept))
    (tmp_path / FITS).write_text(json.dumps({key: {**kept[key], "theta": "0.5"}}))  # damaged: refitted
    with monkeypatch.context() as m:
        m.setattr(fit_store, "__version__", "9.9.9")
        with fits_kept_in(tmp_path):
            assert fit_histogram(B, n_boot=3, seed=1) == other
    assert len(fits) == 6


def test_a_tdbench_re_report_does_not_refit(tmp_path, fits, no_plots):
    key = answer_key_for("tdbench", {"data": "sample"})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.6, r=0.9, g=0.3, seed=4))) as sim:
        res = run("tdbench", "vllm/sim-model", data="sample", base_url=sim.url, out=str(tmp_path / "run"),
                  cache_dir=str(tmp_path / "cache"), quiet=True, td_boot=3, td_image_size=64, limit=10)
    assert res.exit_code == 0 and fits and (tmp_path / "run" / FITS).is_file()
    done = len(fits)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    again = asyncio.run(rereport(tmp_path / "run", cache_dir=str(tmp_path / "cache")))
    assert len(fits) == done  # every fit found in the run directory
    assert again["metrics"] == summary["metrics"] and again["headline"] == summary["headline"]
