"""A shared cache cannot answer one question with another's answer (issue 44, item 1), against a real
redis-server and the simulator, through `evalkit.run` and `evalkit cache verify`:

- entries of a cache written by 0.4 given other keys' answers (swapped) or another answer text (altered)
  are never served: asked again, overwritten, counted in summary.json `cache.rejected`, and `cache verify`
  tells the swapped from the altered;
- an entry forged by a writer who knows the documented format (its `bound` recomputed) is served without a
  secret, as docs/scale.md says, and refused under EVALKIT_CACHE_SECRET, which reaches no file;
- caches written by 0.3.0 itself (tests/fixtures/v03cache, made by its make_fixture.py with the release's
  checkout) answer the same command with 0 requests, and nothing under --cache-signed-only.

The file runs unchanged on 0.3.0 (only the command, `evalkit.run` and the simulator are used; the value
format is written here from docs/scale.md), where it fails: the forged answers are served.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from redis_server import RedisServer, redis_binary

import evalkit
from evalkit.cli import main
from evalkit.sim import SimConfig, SimThread
from evalkit.sim.from_bench import answer_key_for

PREFIX = "evalkit:v1:response:"  # docs/scale.md: every key evalkit writes in Redis starts so
ENV = {"OPENAI_API_KEY": "", "VLLM_API_KEY": ""}
SECRET = "team-cache-secret-canary-5f4dcc3b5aa765d61d8327deb882cf99"
FORGED = "FORGED ANSWER"
# tests/fixtures/v03cache (found from tests/ask/ here, or from a flat tests/ when this file is run on 0.3.0
# itself, with the fixture copied beside it as fixtures/h44_v03cache)
FIXTURE = next((p for tests in Path(__file__).resolve().parents[:2] for name in ("v03cache", "h44_v03cache")
                if (p := tests / "fixtures" / name / "redis.json").is_file()), Path("fixtures/v03cache/redis.json")).parent
FIXTURE_TAG = "h44-v03-cache"  # the --cache-tag the fixture was written under (its make_fixture.py)


@pytest.fixture
def redis(tmp_path: Path):
    redis_binary()
    with RedisServer(tmp_path / "redis") as server:
        yield server


def _data(folder: Path, n: int) -> Path:
    """n four-option questions, each on an image of its own (distinct requests, distinct keys)."""
    from PIL import Image

    (folder / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        Image.new("RGB", (8, 8), (i % 256, (7 * i) // 256, 200)).save(folder / f"images/i{i}.png")
        rows.append({"id": f"q{i}", "image": f"images/i{i}.png", "question": f"Which colour is image {i}?",
                     "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"}, "answer": "ABCD"[i % 4]})
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _sim(data: Path) -> SimThread:
    return SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)})))


def _run(sim: SimThread, data: Path, where: Path, env: dict[str, str] | None = None, **kw):
    """The same command each time, with a fresh run directory and local cache folder under `where`."""
    return evalkit.run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url + "/v1", env={**ENV, **(env or {})},
                       out=str(where / "run"), cache_dir=str(where / "cache"), progress=False, plots=False, **kw)


def _sent(sim: SimThread) -> int:
    return sim.counters.snapshot()["completions"]


def _answers(run_dir: Path) -> dict[str, str]:
    lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["query_id"]: r["response"] for r in map(json.loads, lines)}


def _entries(client) -> dict[str, bytes]:  # noqa: ANN001 - a redis.Redis
    """Every cached answer. (The first run's claims on them stand for a while yet: a refused entry must be
    asked at once all the same, not after they lapse.)"""
    keys = sorted(client.scan_iter(match=PREFIX + "*"))
    return dict(zip(keys, client.mget(keys), strict=True))


def _forge(key: bytes, text: bytes, answer: str) -> bytes:
    """Another answer under `key`, its `bound` recomputed as docs/scale.md defines it: the writer knows the
    format but not the secret (a signature it cannot make is left out)."""
    value = {k: v for k, v in json.loads(text).items() if k not in ("bound", "hmac")}
    value["text"] = answer
    body = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    request_key = key.decode()[len(PREFIX):]
    value["bound"] = hashlib.sha256(request_key.encode("utf-8") + body).hexdigest()
    return json.dumps(value).encode("utf-8")


def _verify(url: str, capsys: pytest.CaptureFixture[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """`evalkit cache verify --cache-url URL` (the command's own entry point, in this process): its exit
    status and what it said, on one line."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (env or {}).items():
            mp.setenv(name, value)
        try:
            code = main(["cache", "verify", "--cache-url", url])
        except SystemExit as e:
            code = e.code
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


def test_swapped_and_altered_entries_are_never_served_but_asked_again_and_overwritten(redis, tmp_path, capsys):
    n, swapped, altered = 300, 100, 50
    data = _data(tmp_path / "ds", n)
    with _sim(data) as sim:
        first = _run(sim, data, tmp_path / "a", cache_url=redis.url)
        assert first.exit_code == 0 and _sent(sim) == n
        truth = _answers(tmp_path / "a" / "run")
        client = redis.client()
        entries = _entries(client)
        assert len(entries) == n
        keys = list(entries)
        # 100 entries given other keys' answers (moved round one place), 50 another answer text
        client.mset({keys[i]: entries[keys[(i + 1) % swapped]] for i in range(swapped)})
        client.mset({k: json.dumps({**json.loads(entries[k]), "text": f"{FORGED} {i}"}).encode()
                     for i, k in enumerate(keys[swapped:swapped + altered])})

        checked, said = _verify(redis.url, capsys)  # (asserted below, once the run has shown what it served)

        sent = _sent(sim)
        second = _run(sim, data, tmp_path / "b", cache_url=redis.url)  # a fresh machine: Redis is all it has
        assert second.exit_code == 0
        again = _answers(tmp_path / "b" / "run")
        assert [a for a in again.values() if FORGED in a] == [], "forged answers were served"
        assert _sent(sim) - sent == swapped + altered  # every bad entry asked again, nothing else
        assert again == truth  # no question answered with another's answer
        assert second.summary["cache"]["rejected"] == swapped + altered
        assert [m for m in second.messages if "150 cached answers did not match their request keys" in m]
        assert second.summary["cache"]["hits"] == n - swapped - altered
        assert checked == 1 and "100 swapped" in said and "50 altered" in said, said

        # the bad entries were overwritten (not kept by a first-answer-stands write): all sound again
        checked, said = _verify(redis.url, capsys)
        assert checked == 0 and "0 swapped" in said and "0 altered" in said, said
        sent = _sent(sim)
        third = _run(sim, data, tmp_path / "c", cache_url=redis.url)
        assert third.exit_code == 0 and _sent(sim) == sent and _answers(tmp_path / "c" / "run") == truth
        assert third.summary["cache"]["rejected"] == 0


def test_a_forged_bound_is_served_without_a_secret_and_refused_with_one(redis, tmp_path, capsys):
    n = 12
    data = _data(tmp_path / "ds", n)
    signed = {"EVALKIT_CACHE_SECRET": SECRET}
    with _sim(data) as sim:
        first = _run(sim, data, tmp_path / "a", env=signed, cache_url=redis.url)
        assert first.exit_code == 0 and _sent(sim) == n
        truth = _answers(tmp_path / "a" / "run")
        client = redis.client()
        entries = _entries(client)
        forged = list(entries)[:2]
        client.mset({k: _forge(k, entries[k], FORGED) for k in forged})

        # without the secret, binding cannot tell a writer who knows the format (docs/scale.md says so)
        unsigned = _run(sim, data, tmp_path / "b", cache_url=redis.url)
        assert unsigned.exit_code == 0 and _sent(sim) == n
        assert sum(FORGED in a for a in _answers(tmp_path / "b" / "run").values()) == 2

        # with it, the forged entries are misses: asked again, overwritten with signed answers
        refused = _run(sim, data, tmp_path / "c", env=signed, cache_url=redis.url)
        assert refused.exit_code == 0 and _sent(sim) == n + 2
        assert _answers(tmp_path / "c" / "run") == truth
        assert refused.summary["cache"]["rejected"] == 2
        checked, said = _verify(redis.url, capsys, signed)
        assert checked == 0 and "0 with a wrong or missing signature" in said, said
    kept = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert kept == [] and SECRET not in " ".join(first.messages + refused.messages) + said


def _fixture_copy(tmp_path: Path) -> tuple[Path, Path]:
    """The 0.3.0 fixture's data and folder cache, copied: runs must not write into the repository."""
    shutil.copytree(FIXTURE / "data", tmp_path / "ds")
    shutil.copytree(FIXTURE / "cache", tmp_path / "v03-cache")
    return tmp_path / "ds" / "data.jsonl", tmp_path / "v03-cache"


def test_caches_written_by_0_3_answer_for_free_except_when_only_signed_entries_may(redis, tmp_path):
    data, folder = _fixture_copy(tmp_path)
    legacy = {k: v.encode("utf-8") for k, v in json.loads((FIXTURE / "redis.json").read_text()).items()}
    n = len(legacy)
    redis.client().mset({PREFIX.encode() + k.encode(): v for k, v in legacy.items()})
    with _sim(data) as sim:
        def run(where: str, cache: Path, env: dict[str, str] | None = None, **kw):
            return evalkit.run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url + "/v1",
                               cache_tag=FIXTURE_TAG, env={**ENV, **(env or {})}, out=str(tmp_path / where),
                               cache_dir=str(cache), progress=False, plots=False, **kw)

        # by default (even with a secret set), paid-for answers are served: the folder, then Redis
        assert run("r1", folder, {"EVALKIT_CACHE_SECRET": SECRET}).exit_code == 0 and _sent(sim) == 0
        assert run("r2", tmp_path / "fresh", cache_url=redis.url).exit_code == 0 and _sent(sim) == 0
        # only signed entries: every 0.3 entry is a miss, in the folder (the flag) and in Redis (the variable)
        strict = run("r3", tmp_path / "v03-cache", cache_signed_only=True)
        assert strict.exit_code == 0 and _sent(sim) == n and strict.summary["cache"]["rejected"] == n
        strict = run("r4", tmp_path / "fresh2", {"EVALKIT_CACHE_SIGNED_ONLY": "1"}, cache_url=redis.url)
        assert strict.exit_code == 0 and _sent(sim) == 2 * n and strict.summary["cache"]["rejected"] == n


def _folder_verify(folder: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(["cache", "verify", "--cache-dir", str(folder), *extra])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


def test_the_local_folder_cache_is_sealed_the_same_way(tmp_path, capsys):
    import sqlite3

    n = 10
    data = _data(tmp_path / "ds", n)
    with _sim(data) as sim:
        first = _run(sim, data, tmp_path / "a")
        assert first.exit_code == 0 and _sent(sim) == n
        truth = _answers(tmp_path / "a" / "run")
        with sqlite3.connect(tmp_path / "a" / "cache" / "cache.db") as db:  # the answers are inline JSON text
            rows = db.execute("SELECT key, value FROM Cache ORDER BY key").fetchall()
            assert len(rows) == n
            (k0, v0), (k1, v1), (k2, v2) = rows[:3]
            db.execute("UPDATE Cache SET value = ? WHERE key = ?", (v1, k0))  # two answers trade places
            db.execute("UPDATE Cache SET value = ? WHERE key = ?", (v0, k1))
            db.execute("UPDATE Cache SET value = ? WHERE key = ?", (json.dumps({**json.loads(v2), "text": FORGED}), k2))
        code, said = _folder_verify(tmp_path / "a" / "cache", capsys)
        assert code == 1 and "2 swapped" in said and "1 altered" in said, said

        again = evalkit.run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV,
                            out=str(tmp_path / "b"), cache_dir=str(tmp_path / "a" / "cache"), progress=False,
                            plots=False)
        assert again.exit_code == 0 and _sent(sim) == n + 3 and again.summary["cache"]["rejected"] == 3
        assert _answers(tmp_path / "b") == truth
        code, said = _folder_verify(tmp_path / "a" / "cache", capsys)
        assert code == 0 and "0 swapped" in said and "0 altered" in said, said
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVALKIT_CACHE_SIGNED_ONLY", "maybe")
        code, said = _folder_verify(tmp_path / "a" / "cache", capsys)
    assert code == 2 and "EVALKIT_CACHE_SIGNED_ONLY" in said and "Traceback" not in said
