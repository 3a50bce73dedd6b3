"""A damaged page in the middle of cache.db stops the run before anything is sent: one line naming the
file and what to do, exit 2.

sqlite reads such a file without complaint until a query reaches the damaged page: the run's lookups
failed quietly (a miss), it paid again for answers the cache held, and then `cache.set_many` raised
`sqlite3.DatabaseError: database disk image is malformed` (3 of 5 offsets). The cache now runs
sqlite's `PRAGMA quick_check` when it is opened.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.ask.store.cache import ResponseCache
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 6
OFFSETS = (0.2, 0.35, 0.5, 0.65, 0.8)  # where in cache.db the damaged page sits (a fraction of its size)


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A run's answers in a cache that has been used for a while (1,500 more answers): many pages."""
    root = tmp_path_factory.mktemp("filled")
    data = make_mcq_jsonl(root / "ds", N, seed=4)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        first = run_main(_args(sim, data, root / "run", root / "cache"))
        assert first.returncode == 0, first.stdout + first.stderr
        with ResponseCache(root / "cache") as cache:
            cache.set_many([(f"{i:064x}", {"text": f"answer {i} " + "x" * 300, "usage": {"input_tokens": 90}})
                            for i in range(1500)])
        assert not list((root / "cache").glob("cache.db-*"))  # everything is in cache.db itself
        yield sim, data, root / "cache"


def _args(sim: SimThread, data: Path, out: Path, cache: Path) -> list[str]:
    return ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data), "--out", str(out),
            "--cache-dir", str(cache), "--no-progress"]


def _damage_page(db: Path, fraction: float) -> tuple[int, int]:
    """Overwrite the start of the page at `fraction` of the file (its header and cell pointers): (its
    number, the file's pages)."""
    raw = db.read_bytes()
    (page_size,) = struct.unpack(">H", raw[16:18])
    page = int(len(raw) * fraction) // page_size
    with db.open("r+b") as f:
        f.seek(page * page_size)
        f.write(b"\xa5" * 96)
    return page + 1, len(raw) // page_size


def test_the_intact_cache_answers_the_run_with_nothing_sent(filled, tmp_path):
    sim, data, cache = filled
    shutil.copytree(cache, tmp_path / "cache")
    before = sim.counters.snapshot()["requests"]
    again = run_main(_args(sim, data, tmp_path / "run", tmp_path / "cache"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert sim.counters.snapshot()["requests"] == before  # what is at stake: every answer is in the cache


@pytest.mark.parametrize("fraction", OFFSETS)
def test_a_damaged_middle_page_is_one_line_and_exit_2_before_any_request(filled, tmp_path, fraction):
    sim, data, cache = filled
    shutil.copytree(cache, tmp_path / "cache")
    db = tmp_path / "cache" / "cache.db"
    page, pages = _damage_page(db, fraction)
    assert 1 < page < pages and pages > 50  # a page in the middle, not the file's header
    before = sim.counters.snapshot()["requests"]
    run = run_main(_args(sim, data, tmp_path / "run", tmp_path / "cache"))
    err = run.stderr.strip()
    assert run.returncode == 2 and "Traceback" not in err and "\n" not in err, run.stdout + run.stderr
    assert f"cache {db} is damaged" in err and "evalkit cache verify --repair" in err
    assert sim.counters.snapshot()["requests"] == before  # nothing paid again
    assert not (tmp_path / "run" / "records.jsonl").exists()
    repaired = run_main(["cache", "verify", "--repair", "--cache-dir", str(tmp_path / "cache")])  # as the line says
    assert repaired.returncode == 0 and "moved the damaged database to cache.db.damaged-" in repaired.stdout
    done = run_main(_args(sim, data, tmp_path / "run", tmp_path / "cache"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sim.counters.snapshot()["requests"] - before <= N  # at most the answers on the damaged page
