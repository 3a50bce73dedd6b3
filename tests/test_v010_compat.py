"""What users paid for keeps working: run directories and caches written by evalkit 0.1.0 itself
(tests/fixtures/v010, made by make_fixtures.py at commit 881f989) are read by today's code.

For each case the fixture is put back where 0.1.0 wrote it (0.1.0's run identity holds the data's
absolute path, and the cache key the server URL), the simulator is started as it was, and:
- the same command re-run sends 0 requests, resumes 0.1.0's run directory (rewriting its
  config.json in today's form) and gives the same metrics;
- a new run directory on the old cache sends 0 requests (the --no-cache run: all, nothing was
  cached; the empty final answer: that one query, 0.1.0 did not cache empty answers);
- `evalkit report` re-scores the untouched 0.1.0 run to the same metrics; `compare` accepts
  0.1.0 runs next to today's.

And a run directory and cache written by main before 0.3.0 began (commit b18ef28, "0.2";
tests/fixtures/v02, made by the same script): they say `evalkit_version` 0.1.0 although they hold
0.2's formats (identity_version, request_key, manifest.json, lint.json, repeats), and are resumed
as what they are, by their format markers, never by that version string.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from evalkit import __version__
from evalkit.cli import build_parser, main, sim_config
from evalkit.engine.evaluate import run
from evalkit.engine.rereport import rereport
from evalkit.multi.compare import compare
from evalkit.sim.server import SimThread

FIXTURES = Path(__file__).parent / "fixtures" / "v010"
# benchmarks whose official requests differ from what 0.1.0 sent (its own prompt wording or image sizes)
OFFICIAL_REQUESTS_CHANGED = {"if-bench", "mme-realworld", "tdbench"}
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "case.json").is_file())
V02 = Path(__file__).parent / "fixtures" / "v02"  # main before 0.3.0 (b18ef28): says 0.1.0, holds 0.2
V02_CASES = sorted(p.name for p in V02.iterdir() if (p / "case.json").is_file())
V03 = Path(__file__).parent / "fixtures" / "v03"  # the 0.3.0 release (afbaf69)
V03_CASES = sorted(p.name for p in V03.iterdir() if (p / "case.json").is_file())


def _case(name: str) -> dict:
    return json.loads((FIXTURES / name / "case.json").read_text())


@contextmanager
def _port_held(case: dict) -> Iterator[None]:
    """The case's fixed port (the cache key holds the endpoint) to this test alone: others wait."""
    with (Path(tempfile.gettempdir()) / f"evalkit-fixture-port-{case['port']}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextmanager
def _installed(name: str) -> Iterator[Path]:
    """The fixture copied to the absolute folder 0.1.0 ran in. That folder and the port are fixed
    (0.1.0 recorded them), so tests on other workers wait for it rather than clobber it."""
    case = _case(name)
    where = Path(case["cwd"])
    with (Path(tempfile.gettempdir()) / f"evalkit-v010-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if where.exists():
            shutil.rmtree(where)
        shutil.copytree(FIXTURES / name, where, ignore=shutil.ignore_patterns("case.json"))
        yield where


@pytest.fixture
def install():
    """`install(name)`: the fixture installed, held until the test ends."""
    with ExitStack() as held:
        yield lambda name: held.enter_context(_installed(name))


def _sim(case: dict) -> SimThread:
    argv = case["sim_argv"][1:]
    return SimThread(sim_config(build_parser(argv).parse_args(argv)), port=case["port"])


def _ask(case: dict, extra: list[str] | None = None) -> int:
    """The command exactly as 0.1.0 was given it (CLI or Python API)."""
    if case["how"] == "api":
        out = {"out": extra[-1]} if extra else {}
        return run("mcq", "vllm/sim-model", data="data/mcq.jsonl", base_url=case["base_url"], cache_dir="cache",
                   progress=False, **out).exit_code
    return main(case["run_argv"][1:] + (extra or []))


class _Fitted:
    """Any value: the maximum-likelihood reliability fit (`reliability_ml*`) is an optimizer's answer
    and moves with the scipy release installed; where r = g its theta is not identifiable at all
    (0.29 with one release, 0.54 with the next). The fit is tested on synthetic data elsewhere."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dict)

    def __repr__(self) -> str:
        return "<ML fit: any>"


def approx_tree(value):
    """`value` with floats compared to 1e-6 relative, and the ML fit left out (see _Fitted)."""
    if isinstance(value, dict):
        return {k: _Fitted() if k.startswith("reliability_ml") else approx_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [approx_tree(v) for v in value]
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-6, abs=1e-9)
    return value


def _metrics(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())["metrics"]


def _known(metrics: dict, expected: dict) -> dict:
    """The metrics 0.1.0 wrote (keys added since, e.g. tdbench's vlmevalkit_*, are new numbers, not changes)."""
    return {k: v for k, v in metrics.items() if k in expected}


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_v010_run_directory_and_cache_resume_free(name, install, monkeypatch, tmp_path, capsys, no_plots):
    case = _case(name)
    where = install(name)
    monkeypatch.chdir(where)
    old_dir = where / case["run_dir"]
    expected = case["summary"]["metrics"]

    untouched = tmp_path / "old-run"  # `evalkit report` on the run exactly as 0.1.0 left it
    shutil.copytree(old_dir, untouched)
    assert _known(rereport_metrics(untouched), expected) == approx_tree(expected)

    with _sim(case) as sim:
        assert _ask(case) == 0
        same_dir = sim.counters.snapshot()["requests"]
        assert _ask(case, ["--out", str(tmp_path / "new")]) == 0
        new_dir = sim.counters.snapshot()["requests"] - same_dir
    assert same_dir == 0
    assert sorted(p.name for p in (where / "runs").iterdir()) == [old_dir.name]  # resumed, not a new folder
    assert _known(_metrics(old_dir), expected) == approx_tree(expected)
    config = json.loads((old_dir / "config.json").read_text())
    assert config["identity"]["identity_version"] == 1 and config["identity"]["benchmark"] == case["bench"]
    assert "written by evalkit 0.1.0" in capsys.readouterr().err
    summary = json.loads((old_dir / "summary.json").read_text())
    if name in OFFICIAL_REQUESTS_CHANGED:
        # 0.1.0 asked these with its own prompts: the paid answers are kept and graded, the run says so;
        # a new directory asks the official requests (an answer to another request is not theirs)
        assert summary["requests"] == "evalkit-0.1 (not official)", summary.get("requests")
        assert summary["older_requests"]["queries"] == case["summary"]["n_queries"]
        assert new_dir == case["summary"]["n_queries"]
    else:
        # a new directory on the old cache: free, except what 0.1.0 never cached
        assert "requests" not in summary
        assert new_dir == case["rerun_requests_new_dir"]
        assert new_dir == {"mcq-nocache": case["summary"]["n_queries"], "mcq-empty": 1}.get(name, 0)
    if new_dir == 0:
        assert _known(_metrics(tmp_path / "new"), expected) == approx_tree(expected)

    again = _ask(case)  # and once more: now in today's form, still the same directory, still free
    assert again == 0 and sorted(p.name for p in (where / "runs").iterdir()) == [old_dir.name]


def rereport_metrics(path: Path) -> dict:
    import asyncio

    return asyncio.run(rereport(path))["metrics"]


def test_compare_accepts_v010_runs_next_to_todays(install, tmp_path, monkeypatch):
    """Two 0.1.0 runs of mcq (TSV and JSONL copies of one set) and a run made today compare."""
    runs = []
    for name in ("mcq", "mcq-jsonl-api"):
        case = _case(name)
        shutil.copytree(FIXTURES / name / case["run_dir"], tmp_path / name)
        runs.append(tmp_path / name)
    case = _case("mcq")
    where = install("mcq")
    monkeypatch.chdir(where)
    with _sim(case):
        assert main(case["run_argv"][1:] + ["--out", str(tmp_path / "today"), "--no-cache"]) == 0
    comparison = compare([*runs, tmp_path / "today"], n_boot=50)
    assert len(comparison.ranking) == 3
    assert {round(r.estimate, 6) for r in comparison.results} == {round(_case("mcq")["summary"]["metrics"]["accuracy"],
                                                                        6)}


def test_reask_asks_a_v010_run_again_with_the_official_requests(install, monkeypatch):
    """`--reask`: the paid 0.1.0 answers to non-official requests are replaced by official ones."""
    case = _case("mme-realworld")
    where = install("mme-realworld")
    monkeypatch.chdir(where)
    run_dir = where / case["run_dir"]
    with _sim(case) as sim:
        assert _ask(case) == 0 and sim.counters.snapshot()["requests"] == 0
        report = (run_dir / "report.md").read_text()
        assert "Requests: **evalkit-0.1 (not official)**" in report
        assert _ask(case, ["--reask"]) == 0
        assert sim.counters.snapshot()["requests"] == case["summary"]["n_queries"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "requests" not in summary and summary["missing"] == 0


def _resumed_free(fixtures: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  check: Callable[[dict, Path, dict], None]) -> tuple[dict, list[dict]]:
    """A release's case put in another folder than the one it was made in (its identity holds the data's
    content hash, not its path), `check(case, run_dir, config)` run on it as it is; then the recorded
    command sends 0 requests and completes in the same directory with the same metrics and identity,
    and a new directory on its cache is free too. The case and the records after the re-run."""
    case = json.loads((fixtures / name / "case.json").read_text())
    where = tmp_path / name
    shutil.copytree(fixtures / name, where, ignore=shutil.ignore_patterns("case.json"))
    run_dir = where / case["run_dir"]
    config = json.loads((run_dir / "config.json").read_text())
    check(case, run_dir, config)
    monkeypatch.chdir(where)
    argv = case["run_argv"][1:]
    with _port_held(case), _sim(case) as sim:
        assert main(argv) == 0
        same_dir = sim.counters.snapshot()["requests"]
        assert main([*argv, "--out", str(tmp_path / "new"), "--no-plots"]) == 0  # (plots: 1.5 s, not the point)
        new_dir = sim.counters.snapshot()["requests"] - same_dir
    assert (same_dir, new_dir) == (0, 0)
    assert sorted(p.name for p in (where / "runs").iterdir()) == [run_dir.name]  # resumed, not a new folder
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] and summary["missing"] == 0 and summary["evalkit_version"] == __version__
    expected = case["summary"]["metrics"]
    for done in (run_dir, tmp_path / "new"):
        assert _known(_metrics(done), expected) == approx_tree(expected)
    assert json.loads((run_dir / "config.json").read_text())["identity"] == config["identity"]
    records = [json.loads(line) for line in (run_dir / "records.jsonl").open()]
    assert len(records) == case["n_records"]
    return case, records


@pytest.mark.parametrize("name", V02_CASES)
def test_v02_run_directory_and_cache_resume_free(name, tmp_path, monkeypatch, capsys):
    """The run directory and cache main wrote before 0.3.0 (`evalkit_version` 0.1.0, 0.2's formats)
    resume free, as a run in today's form (no 0.1.0 migration)."""
    def written_by_b18ef28(case: dict, run_dir: Path, config: dict) -> None:
        written = json.loads((run_dir / "summary.json").read_text())
        assert case["made_with"]["commit"].startswith("b18ef28") and written["evalkit_version"] == "0.1.0"
        assert config["identity"]["identity_version"] == 1 and (run_dir / "lint.json").is_file()
        assert all("request_key" in json.loads(line) for line in (run_dir / "records.jsonl").open())

    case, records = _resumed_free(V02, name, tmp_path, monkeypatch, written_by_b18ef28)
    assert "written by evalkit 0.1.0" not in capsys.readouterr().err  # its format says 0.2, not its version
    assert len(records) == 2 * case["summary"]["n_queries"]  # both repeats kept


@pytest.mark.parametrize("name", V03_CASES)
def test_v03_run_directory_and_cache_resume_free(name, tmp_path, monkeypatch):
    """The run directory and cache the 0.3.0 release wrote (TDBench: rotations, grounding, the run
    directory's reliability fits, the cache folder's intervals and figures) resume free."""
    def written_by_afbaf69(case: dict, run_dir: Path, config: dict) -> None:
        written = json.loads((run_dir / "summary.json").read_text())
        assert case["made_with"]["commit"].startswith("afbaf69") and written["evalkit_version"] == "0.3.0"
        assert config["config"]["data_source"]["kind"] == "local" and (run_dir / "reliability-fits.json").is_file()
        assert (run_dir.parents[1] / "cache" / "intervals.json").is_file()

    case, records = _resumed_free(V03, name, tmp_path, monkeypatch, written_by_afbaf69)
    assert len(records) == case["summary"]["n_queries"]
