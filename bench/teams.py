"""A team's cache: 20,000 queries in 4 shards through Redis, against the same through the local cache.

The simulated server runs in its own process, a real redis-server beside it. Three phases, each four
`evalkit run … --shard K/4` commands started at the same instant, timed from the first start to the last
exit (what a user waits for):

  fill     every query asked once (shards share one Redis): the answers reach Redis and each shard's cache
  redis    a second "machine": fresh local caches, the same Redis: every answer a Redis hit
  local    the same commands again without --cache-url: every answer a local hit (copied there by `redis`)

Reported per phase: queries/s over the whole commands, the chat requests the server received, and the Redis
commands per query (INFO commandstats, this phase only, commands run inside scripts included; a pipeline or
an MGET of many keys is one round trip for many commands, so round trips are at most this).

Then one shared limit: 3 shards of --limit-queries queries against a server with a hidden 40 req/s limit
(OpenAI rate-limit headers, 50 ms latency), started at the same instant, with one Redis and, as the
baseline in the same run, each on its own: answers / (first start to last exit) / limit, and the share
of chat requests refused (429).

    .venv/bin/python bench/teams.py [--queries 20000] [--shards 4] [--limit-queries 1200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import SimProcess, env_without_keys, make_jpeg, write_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from redis_server import RedisServer  # noqa: E402 - the tests' real redis-server, reused


def _commands(client) -> int:  # noqa: ANN001
    return sum(int(v["calls"]) for k, v in client.info("commandstats").items() if k.startswith("cmdstat_"))


def phase(name: str, root: Path, data: Path, sim: SimProcess, shards: int, redis_url: str | None,
          caches: str, client) -> dict:  # noqa: ANN001
    before_cmds, before_req = _commands(client), sim.counters()["requests"]
    env = {**env_without_keys(), "VLLM_API_KEY": ""}
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model",
                               "--base-url", sim.url + "/v1", "--data", str(data), "--shard", f"{k}/{shards}",
                               "--no-progress", "--no-plots", "--concurrency", "64",
                               "--out", str(root / f"{name}-shard{k}"), "--cache-dir", str(root / f"{caches}{k}"),
                               *(["--cache-url", redis_url] if redis_url else [])],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for k in range(1, shards + 1)]
    errors = [p.communicate()[1] for p in procs]
    elapsed = time.monotonic() - start
    bad = [e[-800:] for p, e in zip(procs, errors, strict=True) if p.returncode != 0]
    if bad:
        raise SystemExit(f"{name}: a shard failed:\n" + "\n".join(bad))
    return {"phase": name, "seconds": elapsed, "sent": sim.counters()["requests"] - before_req,
            "redis_cmds": _commands(client) - before_cmds}


def limit_phase(name: str, root: Path, data: Path, shared_url: str | None) -> dict:
    """3 shards against a hidden 40 req/s limit, started together: the share of the limit they reach."""
    with SimProcess("--rps", "40", "--rate-headers", "openai", "--latency-ms", "50") as sim:
        env = {**env_without_keys(), "VLLM_API_KEY": "team-key"}
        start = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model",
                                   "--base-url", sim.url + "/v1", "--data", str(data), "--shard", f"{k}/3",
                                   "--no-progress", "--no-plots", "--out", str(root / f"{name}-{k}"),
                                   "--cache-dir", str(root / f"{name}-cache{k}"),
                                   *(["--cache-url", shared_url] if shared_url else [])],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for k in (1, 2, 3)]
        codes = [p.wait() for p in procs]
        elapsed = time.monotonic() - start
        counts = sim.counters()
    return {"name": name, "codes": codes, "rate": counts["completions"] / elapsed / 40.0,
            "refused": counts["rate_limited"] / max(1, counts["requests"]), "answered": counts["completions"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--limit-queries", type=int, default=1200, help="0: skip the shared-limit part")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="evalkit-teams-"))
    try:
        image = root / "img.jpg"
        make_jpeg(image, (4, 6))
        data = root / "set.jsonl"
        write_dataset(data, image, args.queries)
        with RedisServer(root / "redis") as redis, SimProcess() as sim:
            client = redis.client()
            rows = [phase("fill", root, data, sim, args.shards, redis.url, "a", client),
                    phase("redis", root, data, sim, args.shards, redis.url, "b", client),
                    phase("local", root, data, sim, args.shards, None, "b", client)]
        n = args.queries
        print(f"\n{n:,} queries in {args.shards} shards, started together (first start to last exit)")
        print(f" {'phase':<7} {'seconds':>8} {'queries/s':>10} {'sent':>7} {'redis cmds/query':>17}")
        for r in rows:
            print(f" {r['phase']:<7} {r['seconds']:8.1f} {n / r['seconds']:10,.0f} {r['sent']:7,} "
                  f"{r['redis_cmds'] / n:17.3f}")
        hit = rows[1]
        print(f"\nredis hit phase vs local: {rows[2]['seconds'] / hit['seconds']:.2f}x the local cache's speed; "
              f"{hit['redis_cmds'] / n:.3f} Redis commands per hit (target <= 2)")
        if args.limit_queries:
            limited = root / "limited.jsonl"
            write_dataset(limited, image, args.limit_queries)
            with RedisServer(root / "redis2") as redis:
                rows = [limit_phase("shared", root, limited, redis.url), limit_phase("alone", root, limited, None)]
            print(f"\n3 shards of {args.limit_queries:,} queries, hidden limit 40 req/s, started together")
            print(f" {'limits':<8} {'exit codes':<11} {'answered':>8} {'% of limit':>11} {'refused':>8}")
            for r in rows:
                print(f" {r['name']:<8} {str(r['codes']):<11} {r['answered']:8,} {100 * r['rate']:10.1f}% "
                      f"{100 * r['refused']:7.1f}%")
            print("targets (shared): >= 85% of the limit, < 5% refused")
    finally:
        if not os.environ.get("KEEP"):
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
