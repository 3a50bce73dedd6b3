"""A headline interval is kept in the cache folder by a hash of its score table (issue 35 item 16): a
fresh --out on a warm cache has the same table and does not bootstrap it again; any other table, seed,
resample count or level, or a damaged entry, is computed afresh; runs sharing the folder keep each
other's entries."""

from __future__ import annotations

import json

import pytest

from evalkit.metrics.analysis import significance
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.fit_store import SHARED, shared_kept_in


def _table(flip: int | None = None) -> ScoreTable:
    values = [1.0 if i % 3 else 0.0 for i in range(300)]
    if flip is not None:
        values[flip] = 1.0 - values[flip]
    return ScoreTable.plain("accuracy", [f"q{i}" for i in range(300)], values)


@pytest.fixture
def resamples(monkeypatch):
    """How many times a bootstrap was drawn."""
    calls = []
    real = significance.resample

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(significance, "resample", counted)
    return calls


def test_a_kept_interval_is_the_computed_one_and_only_for_its_own_inputs(tmp_path, resamples):
    with shared_kept_in(tmp_path):
        first = significance.bootstrap_ci(_table(), n_boot=400, seed=0)
    assert len(resamples) == 1 and (tmp_path / SHARED).is_file()
    with shared_kept_in(tmp_path):
        again = significance.bootstrap_ci(_table(), n_boot=400, seed=0)
    assert again == first and len(resamples) == 1  # same bytes, not drawn again
    assert significance.bootstrap_ci(_table(), n_boot=400, seed=0) == first  # outside a block: computed, equal
    assert len(resamples) == 2
    with shared_kept_in(tmp_path):
        others = [significance.bootstrap_ci(_table(flip=7), n_boot=400, seed=0),
                  significance.bootstrap_ci(_table(), n_boot=400, seed=1),
                  significance.bootstrap_ci(_table(), n_boot=300, seed=0),
                  significance.bootstrap_ci(_table(), n_boot=400, seed=0, level=0.9)]
    assert len(resamples) == 6 and len(others) == 4  # each drawn: none of them is the kept one's inputs


def test_a_damaged_entry_is_computed_again_and_other_runs_entries_are_kept(tmp_path, resamples):
    with shared_kept_in(tmp_path):
        first = significance.bootstrap_ci(_table(), n_boot=400, seed=0)
    kept = json.loads((tmp_path / SHARED).read_text())
    (tmp_path / SHARED).write_text(json.dumps({k: {"lo": "not a number"} for k in kept}))
    with shared_kept_in(tmp_path):
        assert significance.bootstrap_ci(_table(), n_boot=400, seed=0) == first
    assert len(resamples) == 2
    with shared_kept_in(tmp_path):  # another run's table beside it
        significance.bootstrap_ci(_table(flip=3), n_boot=400, seed=0)
    assert len(json.loads((tmp_path / SHARED).read_text())) == 2
    (tmp_path / SHARED).write_text("{ torn")
    with shared_kept_in(tmp_path):
        assert significance.bootstrap_ci(_table(), n_boot=400, seed=0) == first
    assert len(resamples) == 4
