"""Peak memory of a run of large images: is it bounded by the concurrency, not by the data?

Writes (into --workdir, else a temporary folder removed at the end) --images distinct JPEG files of
about --mpx megapixels (one picture, each file made distinct by a comment segment, so every one is a
new image to hash, prepare and send) and an `mcq` JSONL set with one question per image. Then, for
each wire in --wires, runs

    evalkit run mcq --data SET --model PROVIDER/sim-model --no-cache --concurrency C --no-progress --no-plots

as a child process against the simulated server (`evalkit sim`, its own process) and prints the
child's peak RSS (os.wait4), its wall time and the requests the server received. Wires: openai
(images resized to 2048 px), anthropic (1568 px, 1.15 Mpx), gemini (google/: 3072 px), vllm (no
documented limit: the file's own bytes are sent).

    .venv/bin/python bench/image_memory.py [--images 300] [--mpx 12] [--concurrency 32]
        [--wires openai,anthropic,gemini,vllm] [--limit-mb 600] [--workdir DIR]

Target: peak RSS <= --limit-mb for every wire (exit 0 when met). The simulator decodes every image
it receives to fingerprint it, so a 3,000-image set takes the server, not evalkit, several minutes
per wire on two cores; a few hundred images already fill every bounded buffer (the memo, the
requests in flight) many times over, which is what the figure is about.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import SimProcess, env_without_keys
from PIL import Image, ImageFilter

WIRES = {  # wire -> (model spec, extra flags, environment), the simulator's URL filled in later
    "openai": ("openai/sim-model", lambda url: ["--base-url", url + "/v1"], {"OPENAI_API_KEY": "sk-bench"}),
    "anthropic": ("anthropic/sim-model", lambda url: [], {"ANTHROPIC_API_KEY": "sk-ant-bench"}),
    "gemini": ("google/sim-model", lambda url: [], {"GEMINI_API_KEY": "gm-bench"}),
    "vllm": ("vllm/sim-model", lambda url: ["--base-url", url], {"VLLM_API_KEY": "bench"}),
}
URL_VARS = {"anthropic": "ANTHROPIC_BASE_URL", "gemini": "GEMINI_BASE_URL"}


def base_jpeg(mpx: float, seed: int = 3) -> bytes:
    """One photo-like JPEG of about `mpx` megapixels (smooth colour fields with grain), quality 90."""
    rng = random.Random(seed)
    w = int((mpx * 1e6 * 4 / 3) ** 0.5)
    h = int(w * 3 / 4)
    small = Image.frombytes("RGB", (w // 16, h // 16), bytes(rng.getrandbits(8) for _ in range((w // 16) * (h // 16) * 3)))
    img = small.resize((w, h), Image.Resampling.BICUBIC).filter(ImageFilter.GaussianBlur(2))
    grain = Image.effect_noise((w, h), 24).convert("RGB")
    img = Image.blend(img, grain, 0.15)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def distinct(jpeg: bytes, k: int) -> bytes:
    """The same picture with a COM segment naming k after SOI: other bytes, another image to the cache."""
    text = f"evalkit bench image {k}".encode()
    return jpeg[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + jpeg[2:]


def write_set(folder: Path, n: int, mpx: float) -> tuple[Path, int]:
    """(the JSONL set, one image's size in bytes)."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    jpeg = base_jpeg(mpx)
    with open(folder / "data.jsonl", "w", encoding="utf-8") as fh:
        for k in range(n):
            name = f"images/img{k:05d}.jpg"
            (folder / name).write_bytes(distinct(jpeg, k))
            fh.write(json.dumps({"id": f"q{k:05d}", "image": name, "question": f"Question {k}: what is shown?",
                                 "options": {"A": "a field", "B": "a lake", "C": "a road", "D": "a roof"},
                                 "answer": "ABCD"[k % 4]}) + "\n")
    return folder / "data.jsonl", len(jpeg)


def one_run(wire: str, data: Path, sim: SimProcess, work: Path, concurrency: int) -> dict[str, float]:
    model, flags, keys = WIRES[wire]
    env = {**env_without_keys(), **keys}
    if wire in URL_VARS:
        env[URL_VARS[wire]] = sim.url
    out = work / f"run-{wire}"
    shutil.rmtree(out, ignore_errors=True)
    sim.reset()
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--data", str(data), "--model", model, *flags(sim.url),
           "--no-cache", "--concurrency", str(concurrency), "--no-progress", "--no-plots", "--out", str(out)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=str(work), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()  # drained as it runs (a full pipe would stall the child)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if code != 0:
        raise RuntimeError(f"{wire}: evalkit run exited {code} after {wall:.0f}s: {err.decode(errors='replace')[-1500:]}")
    return {"rss_mb": usage.ru_maxrss / 1024, "wall_s": wall, "requests": float(sim.counters()["requests"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--mpx", type=float, default=12.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--wires", default="openai,anthropic,gemini,vllm")
    ap.add_argument("--limit-mb", type=float, default=600.0)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    wires = [w for w in args.wires.split(",") if w]
    unknown = [w for w in wires if w not in WIRES]
    if unknown:
        ap.error(f"unknown wire(s): {', '.join(unknown)} (known: {', '.join(WIRES)})")
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="image-memory-"))
    ok = True
    try:
        t0 = time.monotonic()
        data, size = write_set(work / "set", args.images, args.mpx)
        print(f"{args.images:,} images of {args.mpx:g} Mpx, {size / 2**20:.1f} MB each "
              f"({args.images * size / 2**30:.1f} GB), written in {time.monotonic() - t0:.0f} s", flush=True)
        with SimProcess() as sim:
            for wire in wires:
                r = one_run(wire, data, sim, work, args.concurrency)
                good = r["rss_mb"] <= args.limit_mb
                ok &= good
                print(f"{wire:<10} peak RSS {r['rss_mb']:7.1f} MB  wall {r['wall_s']:6.1f} s  requests "
                      f"{r['requests']:6.0f}  {'ok' if good else f'over {args.limit_mb:g} MB'}", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
