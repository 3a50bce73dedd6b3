"""Start-up time of evalkit's light commands, against importing rich in the same run.

Each command runs in its own process (the installed `evalkit` script when the venv has one,
else `python -m evalkit.cli`); its wall time is the median of --repeats runs. The baseline is
`python -c "import rich.console"` (what every command needs to print), timed in the same
rounds: each round runs every command once, in an order that rotates from round to round,
so load that comes and goes on the machine falls on all of them alike.

  --help, --version, list, run --help, run BENCH --help (every benchmark)   target <= 3 x baseline
  demo (24 queries against the built-in simulator, report and plots)
      against `python -c "import aiohttp, rich.console"`                     target <= 5 x (reported)

    .venv/bin/python bench/startup.py [--repeats 10] [--demo-repeats 3] [--no-demo]

Exit 0 when every light command is within its target (the demo's figure is information).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, env_without_keys

from evalkit.benchmarks import list_benchmarks

LIGHT_TARGET = 3.0
DEMO_TARGET = 5.0


def evalkit_command() -> list[str]:
    script = Path(sys.executable).parent / "evalkit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "evalkit.cli"]


def wall_time(cmd: list[str], timeout_s: float) -> float:
    """Seconds from start to exit of one process (its output discarded); a failure stops the bench."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(ROOT), env=env_without_keys(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=timeout_s)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return elapsed


def medians(commands: dict[str, list[str]], repeats: int, timeout_s: float) -> dict[str, float]:
    """Median wall time of each command over `repeats` rounds, the order rotating by one each round."""
    names = list(commands)
    for name in names:  # warm-up: bytecode caches and the file cache
        wall_time(commands[name], timeout_s)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order if r % 2 == 0 else reversed(order):
            times[name].append(wall_time(commands[name], timeout_s))
    return {name: statistics.median(v) for name, v in times.items()}


def row(name: str, seconds: float, base: float, target: float | None) -> tuple[str, bool]:
    ratio = seconds / base
    ok = target is None or ratio <= target
    check = "" if target is None else f"<= {target:g} {'ok' if ok else 'OVER'}"
    return f"{name:<34} {seconds * 1000:8.0f} {ratio:8.2f}   {check}", ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=10, help="runs per light command and baseline (median)")
    p.add_argument("--demo-repeats", type=int, default=3, help="runs of `evalkit demo` and its baseline")
    p.add_argument("--no-demo", action="store_true", help="skip `evalkit demo`")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per process")
    args = p.parse_args(argv)

    evalkit = evalkit_command()
    print(f"evalkit command: {' '.join(evalkit)}; {args.repeats} runs each, median")
    light = {"--help": ["--help"], "--version": ["--version"], "list": ["list"], "run --help": ["run", "--help"]}
    light.update({f"run {name} --help": ["run", name, "--help"] for name in list_benchmarks()})
    commands = {"baseline: import rich.console": [sys.executable, "-c", "import rich.console"]}
    commands.update({f"evalkit {name}": evalkit + argv_ for name, argv_ in light.items()})
    times = medians(commands, args.repeats, args.timeout)

    base_name = next(iter(commands))
    base = times[base_name]
    print(f"\n{'command':<34} {'ms':>8} {'vs base':>8}   target")
    print(row(base_name, base, base, None)[0])
    all_ok = True
    for name in list(commands)[1:]:
        line, ok = row(name, times[name], base, LIGHT_TARGET)
        all_ok &= ok
        print(line)

    if not args.no_demo:
        # without --out each demo writes into a fresh temporary folder (its cache too) and removes it
        demo = {"baseline: import aiohttp, rich.console": [sys.executable, "-c", "import aiohttp, rich.console"],
                "evalkit demo": evalkit + ["demo"]}
        demo_times = medians(demo, args.demo_repeats, args.timeout)
        demo_base = demo_times["baseline: import aiohttp, rich.console"]
        print(f"\n{args.demo_repeats} runs each, median (the demo's target is reported, not enforced)")
        print(row("baseline: import aiohttp, rich.console", demo_base, demo_base, None)[0])
        print(row("evalkit demo", demo_times["evalkit demo"], demo_base, DEMO_TARGET)[0])

    print(f"\nlight commands within {LIGHT_TARGET:g} x: {'yes' if all_ok else 'NO'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
