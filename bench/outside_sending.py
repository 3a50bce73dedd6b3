"""Time outside sending (issue 44, item 13): three commands that send nothing, timed as a user runs them.

Three runs of --items questions (bench/_canned.py's MME-RealWorld-shaped set: ~30 KB JPEGs, 40
questions a picture), made once by a suite of three models against the canned server (timed: the
sending, for reference). Then, with the server stopped, each command is a whole `evalkit` process:

    suite    evalkit run --suite S --out OUT --cache-dir C      (every answer recorded: nothing to send)
    compare  evalkit compare R1 R2 R3 --out NEW                 (its report and plots drawn afresh)
    mlflow   evalkit export R1 R2 R3 --to mlflow --tracking-uri sqlite:///STORE

against baselines measured in the same invocation: `floor` (a Python process that reads the data file
and the three records.jsonl files with json: what any of them must read), and for mlflow `empty run`
(a Python process that logs one empty run into the same store with MLflow's client: its import and
store) and `own part` (a process that imports evalkit and does what the export computes before MLflow
is called: reading the three runs, their metrics, parameters and keys).

    .venv/bin/python bench/outside_sending.py                      # all three, about 2-4 minutes
    .venv/bin/python bench/outside_sending.py --only compare       # one of them: suite, compare, mlflow
    .venv/bin/python bench/outside_sending.py --profile suite      # also a cProfile of it (CPU time)

Each figure is the best of --repeats rounds (wall; the child's CPU time beside it). Targets (issue 44):
suite and compare <= 3 s each; mlflow: own part <= 1 s and the whole <= empty run + 2 s. Exit 0 when
all that were timed are met. The data, runs and cache are kept in --workdir (default: a temporary
folder) so a second invocation with the same --workdir skips the sending.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _canned import CannedServer, build_dataset
from _common import ROOT, env_without_keys

TARGET_S = 3.0  # suite and compare, each
OWN_TARGET_S = 1.0  # mlflow: evalkit's own part
OVER_EMPTY_S = 2.0  # mlflow: the whole, over logging one empty run
N_IMAGES_PER = 40  # questions per picture

FLOOR = """
import json, sys
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            json.loads(line)
"""

EMPTY_RUN = """
import logging, sys
import mlflow
logging.getLogger("mlflow").setLevel(logging.WARNING)
logging.getLogger("alembic").setLevel(logging.WARNING)
client = mlflow.MlflowClient(tracking_uri=sys.argv[1])
found = client.get_experiment_by_name("evalkit")
experiment = found.experiment_id if found else client.create_experiment("evalkit")
run = client.create_run(experiment).info.run_id
client.set_terminated(run, "FINISHED")
"""

OWN_PART = """
import sys
import evalkit.cli  # noqa: F401 - as the command starts
from evalkit.export.runs import flat_settings, read_export_run, run_metrics
from evalkit.export.to_mlflow import mlflow_name
for path in sys.argv[1:]:
    run = read_export_run(path, records=False)
    run.run_key()
    [mlflow_name(k) for k in run_metrics(run)]
    [mlflow_name(k) for k in flat_settings(run.settings())]
    run.artifacts()
"""

PROFILE = """
import cProfile, pstats, sys, time
from evalkit.cli import main
profile = cProfile.Profile(time.process_time)  # CPU time: a busy machine's waits are not counted
profile.enable()
try:
    main(sys.argv[1:])
finally:
    profile.disable()
    stats = pstats.Stats(profile, stream=sys.stderr)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(20)
"""


def child_env() -> dict[str, str]:
    """evalkit's environment without keys, and with bytecode written as an installed package has it."""
    env = {k: v for k, v in env_without_keys().items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "VLLM_API_KEY": "sk-bench", "MPLBACKEND": "Agg"}


def timed_child(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process, start to exit; CPU from its own rusage (os.wait4)."""
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env)  # stdout/stderr inherited: redirected by the caller's argv
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:8])} ... exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def evalkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalkit.cli", *args]


def quiet(argv: list[str], log: Path, cwd: Path = ROOT) -> list[str]:
    """argv run in `cwd` through /bin/sh with its output to `log` (posix_spawn has no redirection of its own;
    `exec`: the shell becomes the command, so its rusage is the command's)."""
    return ["/bin/sh", "-c", f"cd {shlex.quote(str(cwd))} && exec {shlex.join(argv)} >{shlex.quote(str(log))} 2>&1"]


def best(name: str, rounds: int, make: object) -> tuple[float, float]:
    """The best wall of `rounds` runs of make() -> (wall, cpu), and the CPU of that round."""
    got = []
    for r in range(rounds):
        wall, cpu = make(r)  # type: ignore[operator]
        got.append((wall, cpu))
        print(f"  round {r + 1}  {name:<10} {wall:6.2f} s wall  {cpu:5.2f} s CPU", flush=True)
    return min(got)


def make_runs(work: Path, items: int, env: dict[str, str]) -> tuple[Path, Path, list[Path]]:
    """The suite file and its three complete runs (made once per --workdir)."""
    data = build_dataset(work, items, max(1, items // N_IMAGES_PER))
    out, cache, suite = work / "out", work / "cache", work / "suite.toml"
    runs = sorted(out.glob("mcq-*"))
    if len(runs) == 3 and all((r / "summary.json").is_file() for r in runs) and suite.is_file():
        return suite, out, runs
    shutil.rmtree(out, ignore_errors=True)
    with CannedServer(0) as server:
        suite.write_text(f'[[benchmarks]]\nname = "mcq"\ndata = "{data}"\n' + "".join(
            f'\n[[models]]\nspec = "vllm/sim-model"\nlabel = "m{i}"\nbase_url = "{server.url}/v1"\n'
            f"extra = {{ top_k = {i + 1} }}\n" for i in range(3)), encoding="utf-8")
        wall, cpu = timed_child(quiet(evalkit("run", "--suite", str(suite), "--out", str(out), "--cache-dir",
                                              str(cache), "--no-progress"), work / "fill.log"), env)
    print(f"  sending: the suite's first run, {3 * items:,} queries answered at once: {wall:.2f} s wall, "
          f"{cpu:.2f} s CPU (for reference)", flush=True)
    return suite, out, sorted(out.glob("mcq-*"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="suite,compare,mlflow")
    ap.add_argument("--profile", choices=("suite", "compare", "mlflow"), action="append", default=[])
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    env = child_env()
    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="evalkit-outside-")
    work = args.workdir or Path(tmp.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    try:
        timed_child(quiet(evalkit("--help"), work / "help.log"), env)  # bytecode written once
        suite, out, runs = make_runs(work, args.items, env)
        data = next(work.glob(f"data-{args.items}.jsonl"))
        log = work / "last.log"
        floor = best("floor", args.repeats, lambda r: timed_child(
            quiet([sys.executable, "-c", FLOOR, str(data), *(str(run / "records.jsonl") for run in runs)], log), env))
        results: list[tuple[str, float, float, str, bool]] = []
        commands = {
            "suite": lambda r: evalkit("run", "--suite", str(suite), "--out", str(out), "--cache-dir",
                                       str(work / "cache"), "--no-progress"),
            "compare": lambda r: evalkit("compare", *map(str, runs), "--out", str(work / f"compare-{time.time_ns()}")),
            "mlflow": lambda r: evalkit("export", *map(str, runs), "--to", "mlflow", "--tracking-uri", uri),
        }
        store = work / "mlflow"  # the tracking store and its artifacts (./mlruns beside it)
        uri = f"sqlite:///{store / 'store.db'}"
        if "mlflow" in only:
            shutil.rmtree(store, ignore_errors=True)
            store.mkdir()
            timed_child(quiet([sys.executable, "-c", EMPTY_RUN, uri], log, store), env)  # the store's tables made
        for name in only:
            cwd = store if name == "mlflow" else ROOT
            took = best(name, args.repeats, lambda r, name=name, cwd=cwd: timed_child(
                quiet(commands[name](r), log, cwd), env))
            if name == "mlflow":
                empty = best("empty run", args.repeats, lambda r: timed_child(
                    quiet([sys.executable, "-c", EMPTY_RUN, uri], log, store), env))
                own = best("own part", args.repeats, lambda r: timed_child(
                    quiet([sys.executable, "-c", OWN_PART, *map(str, runs)], log), env))
                results.append(("mlflow own part", *own, f"<= {OWN_TARGET_S:g} s", own[0] <= OWN_TARGET_S))
                results.append(("mlflow export", *took, f"<= empty run {empty[0]:.2f} + {OVER_EMPTY_S:g} s",
                                took[0] <= empty[0] + OVER_EMPTY_S))
            else:
                results.append((name, *took, f"<= {TARGET_S:g} s", took[0] <= TARGET_S))
        for name in args.profile:
            print(f"\n---- cProfile of {name} (CPU time) ----", flush=True)
            subprocess.run([sys.executable, "-c", PROFILE, *commands[name](0)[3:]], env=env,
                           cwd=str(store if name == "mlflow" else ROOT), stdout=subprocess.DEVNULL)
    finally:
        if tmp is not None:
            tmp.cleanup()
    load = os.getloadavg()[0]
    print(f"\n3 runs of {args.items:,} questions; best of {args.repeats}; load average {load:.1f} on "
          f"{os.cpu_count()} cores; floor (reading the data and the records with json) {floor[0]:.2f} s")
    print(f"  {'command':<16} {'wall s':>7} {'CPU s':>6} {'vs floor':>8}  target")
    for name, wall, cpu, target, ok in results:
        print(f"  {name:<16} {wall:7.2f} {cpu:6.2f} {wall / floor[0]:8.1f}  {target} {'ok' if ok else 'MISSED'}")
    return 0 if all(ok for *_, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
