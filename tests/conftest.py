"""Fixtures for the whole test tree: quick retries, runs without figures, the shared benchmark data.

Each folder's conftest.py holds the fixtures its own tests share; what test files import by name
(the checkout's paths, the synthetic MCQ sets) is in synthetic_data.py, beside this file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# PYTHONDONTWRITEBYTECODE=1 (set on the machines the suite is timed on) kept pytest from caching the test
# modules it rewrites for their asserts: each of the three workers rewrote all ~270 of them again at every
# run (21 s of CPU per worker collecting, 9 s with the cache). The test processes keep their bytecode under
# .pytest_cache instead (never beside the sources, which the variable is there to keep clean); the children
# they start honour the variable as before.
if sys.dont_write_bytecode and not sys.pycache_prefix:
    sys.pycache_prefix = str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "pycache")
    sys.dont_write_bytecode = False

# One OpenBLAS thread, as the `evalkit` command sets (evalkit.cli._one_blas_thread), for the workers'
# in-process runs and every child they start: set before numpy is first imported
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from synthetic_data import SHARED_DATA  # noqa: E402  (after the BLAS variables: it imports PIL)

# the longest single test (a wheel built and installed): started first of all
FIRST = ("tests/cli/test_packaging.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules holding a `slow` test run first, FIRST before them, each module kept whole (its module
    fixtures made once) and the order otherwise as collected. Under xdist's worksteal each worker is
    handed a contiguous share of this list and an idle one steals from the end of another's: the long
    tests start at the beginning, and the run ends on short ones spread over every worker (before,
    the wheel test started 450 s into an 11-minute run and its worker finished alone, 40 s after the
    others)."""
    def path(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    slow = {path(item) for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: (path(item) not in FIRST, path(item) not in slow))


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """run() retries with a 10 ms backoff ceiling doubling to 0.2 s instead of 0.5 s to 20 s.

    The attempts, what is retried and the Retry-After pauses are unchanged; only the jittered
    sleeps between attempts shrink (run() has no backoff option, so its RetryPolicy is wrapped)."""
    import dataclasses

    from evalkit.ask.retry import RetryPolicy

    @dataclasses.dataclass(frozen=True)
    class FastPolicy(RetryPolicy):  # a class, not a partial: wiring reads RetryPolicy's defaults off it
        initial_s: float = 0.01
        max_s: float = 0.2

    monkeypatch.setattr("evalkit.engine.endpoints.wiring.RetryPolicy", FastPolicy)


@pytest.fixture
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs plan their figures (report.md names them as usual) but draw none: for tests that look at
    metrics, counts and requests only. Every figure is still drawn from real runs' data in
    test_plots, test_run_report, test_compare, test_compare_real and each benchmark's sample runs."""
    from evalkit.report import figures

    def planned_only(plot_dir: Path, results, **_: object) -> list[tuple[str, Path]]:
        return [(f.title, f.path) for f in figures.plan_figures(Path(plot_dir), results)]

    monkeypatch.setattr(figures, "draw_all", planned_only)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"real benchmark data not present at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """An empty MLflow SQLite store, made once per test run and shared by its workers (under a file lock,
    in the folder of the run's temporary folders): creating one runs MLflow's schema migrations (5-20 s
    on a busy machine), copying the file takes milliseconds."""
    from filelock import FileLock

    mlflow = pytest.importorskip("mlflow")
    root = tmp_path_factory.getbasetemp()
    root = root.parent if worker_id != "master" else root  # xdist: one folder above every worker's
    folder = root / "mlflow-template"
    db = folder / "mlflow.db"
    with FileLock(str(root / "mlflow-template.lock")):
        if not db.is_file():
            folder.mkdir(exist_ok=True)
            making = folder / "making.db"
            here = os.getcwd()
            os.chdir(folder)  # the store's Default experiment keeps its artifacts beside it (./mlruns)
            try:
                mlflow.MlflowClient(tracking_uri=f"sqlite:///{making}").search_experiments()
            finally:
                os.chdir(here)
            making.rename(db)
    return db


@pytest.fixture
def mlflow_uri(mlflow_template: Path, tmp_path: Path) -> str:
    """A fresh MLflow store of the test's own (a copy of the empty one), as a tracking URI."""
    import shutil

    db = tmp_path / "mlflow.db"
    shutil.copyfile(mlflow_template, db)
    return f"sqlite:///{db}"
