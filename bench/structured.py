"""How many answers a model that drifts from the asked format loses, with and without `--structured`
(issue 47, item 3).

The simulated server (its own process, `evalkit sim --drift SHARE`) words a share of its replies off the
format (a letter as "the second option", a box as prose with extra numbers), which the rules cannot read;
a request carrying an answer schema is answered as JSON in it. For each drift share, TDBench grounding
(boxes) and an MCQ set (letters) are run in robust mode without and with `--structured`; the unparsed
share of each is printed, and the ratio of the flag's run against its baseline measured in the same script
(the same set, model and drift without the flag).

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
    rows: list[tuple[str, float, float, float, int]] = []  # set, drift, unparsed without and with, queries
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
            for drift in drifts:
                with SimProcess("--bench", bench, "--data", options["data"], "--theta", "1", "--r", "1",
                                "--drift", str(drift)) as sim:
                    shares = []
                    for structured in (False, True):
                        share, n = unparsed_share(bench, sim, root / f"{name}-{drift}-{structured}", structured,
                                                  **options)
                        shares.append(share)
                        print(f"{name:18} drift {drift:4.2f}  structured {structured!s:5}  unparsed {share:6.1%} "
                              f"of {n}", flush=True)
                rows.append((name, drift, shares[0], shares[1], n))
                ok &= shares[1] == 0.0
        elapsed = time.monotonic() - started
    print()
    print(f"{'set':18} {'drift':>5} {'queries':>8} {'unparsed without':>17} {'with --structured':>18} {'ratio':>6}")
    for name, drift, off, on, n in rows:
        ratio = f"{on / off:.2f}" if off else "-"
        print(f"{name:18} {drift:5.2f} {n:8} {off:17.1%} {on:18.1%} {ratio:>6}")
    print(f"\n{elapsed:.0f} s; target: 0 unparsed with --structured at every drift: {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
