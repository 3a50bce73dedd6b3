"""How many answers a model that drifts from the asked format loses, with and without `--structured`
(issue 47, item 3).

The simulated server (its own process, `evalkit sim --drift SHARE`) words a share of its replies off the
format (a letter as "the second option", a box as prose with extra numbers), which the rules cannot read;
a request carrying an answer schema is answered as JSON in it. For each drift share, TDBench grounding
(boxes) and an MCQ set (letters) are run in robust mode without and with `--structured`; the unparsed
share of each is printed, and the ratio against the baseline measured in the same script (the same run at
drift 0, without the flag).

    .venv/bin/python bench/structured.py [--drifts 0,0.1,0.3,0.5] [--mcq-items 200]

Exits 0 when every `--structured` run leaves 0 answers unparsed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _common import SimProcess, env_without_keys, make_jpeg, write_dataset

import evalkit

KEY = {"OPENAI_API_KEY": "sk-bench-structured"}


def unparsed_share(bench: str, sim: SimProcess, out: Path, structured: bool, **options) -> tuple[float, int]:
    """(the share of answers left unparsed, queries) of one robust-mode run against `sim`."""
    done = evalkit.run(bench, "openai/sim-model", base_url=sim.url + "/v1", env={**env_without_keys(), **KEY},
                       mode="robust", structured=structured, out=str(out), no_cache=True, progress=False,
                       plots=False, quiet=True, **options)
    if done.exit_code != 0:
        raise RuntimeError(f"{bench} run failed: {done.messages}")
    methods = done.summary["parse_methods"]
    total = sum(methods.values())
    return methods.get("unparsed", 0) / total, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drifts", default="0,0.1,0.3,0.5", help="drift shares to simulate (comma separated)")
    parser.add_argument("--mcq-items", type=int, default=200, help="items of the MCQ set (default 200)")
    args = parser.parse_args()
    drifts = [float(d) for d in args.drifts.split(",")]
    rows: list[tuple[str, float, bool, float, int, float]] = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        image = root / "img.jpg"
        make_jpeg(image)
        data = root / "mcq.jsonl"
        write_dataset(data, image, args.mcq_items)
        sets = {"tdbench-grounding": ("tdbench", {"data": "sample", "td_set": "grounding"}),
                "mcq": ("mcq", {"data": str(data)})}
        started = time.monotonic()
        for name, (bench, options) in sets.items():
            baseline = None
            for drift in drifts:
                with SimProcess("--bench", bench, "--data", options["data"], "--theta", "1", "--r", "1",
                                "--drift", str(drift)) as sim:
                    for structured in (False, True):
                        out = root / f"{name}-{drift}-{structured}"
                        share, n = unparsed_share(bench, sim, out, structured, **options)
                        if baseline is None:
                            baseline = share
                        ratio = (share / baseline) if baseline else (0.0 if share == 0 else float("inf"))
                        rows.append((name, drift, structured, share, n, ratio))
                        ok &= not structured or share == 0.0
                        print(f"{name:18} drift {drift:4.2f}  structured {structured!s:5}  unparsed {share:6.1%} "
                              f"of {n}", flush=True)
        elapsed = time.monotonic() - started
    print()
    print(f"{'set':18} {'drift':>5} {'flag':>5} {'unparsed':>9} {'queries':>8}  vs drift 0 without the flag")
    for name, drift, structured, share, n, ratio in rows:
        shown = "base" if drift == drifts[0] and not structured else f"{ratio:.2f}" if ratio != float("inf") else "inf"
        print(f"{name:18} {drift:5.2f} {'on' if structured else 'off':>5} {share:9.1%} {n:8}  {shown}")
    print(f"\n{elapsed:.0f} s; target: 0 unparsed with --structured at every drift: {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
