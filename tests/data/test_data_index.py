"""The saved index of a big data file (MME-RealWorld's base64 parts, its VLMEvalKit TSV): the first
run reads the file once and indexes it, the next run of the same data (another --out, a resume, a
shard) reads the index and only the bytes of the items it asks, with the very same identity, run
directory, request keys and records as a run without the index. A file changed since (same size, new
mtime) is read again, with a note; a damaged index is rebuilt, with a note; a registered (Hub) source
keeps its index beside the Hub cache.

Bytes read are the `rchar` of each `evalkit run` child process (/proc/<pid>/io, read once it has
exited and before it is reaped): everything it read, its imports included.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest
from cli_under_test import run_counting_reads, run_main
from synthetic_data import mme_tsv, padded_jpeg

from evalkit.sim.server import SimConfig, SimThread

pytestmark = pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/<pid>/io")

CATEGORIES = [("Perception/OCR with Complex Context", "license"), ("Reasoning/Remote Sensing", "position"),
              ("Perception/Monitoring", "Person/attribute/color")]


def record(i: int, answer_shift: int = 0) -> dict:
    category, l2 = CATEGORIES[i % len(CATEGORIES)]
    return {"index": i, "question": f"Question {i}: how many discs?",
            "multi-choice options": [f"({x}) {i + k}" for k, x in enumerate("ABCDE")],
            "answer": "ABCDE"[(i + answer_shift) % 5], "category": category, "l2-category": l2}


def write_parts(folder: Path, rows: int, image_bytes: int) -> dict[str, int]:
    """A Hub-snapshot-shaped folder with one base64 part; returns each index -> its record's bytes."""
    part = folder / "MME-RealWorld" / "MME_RealWorld_base64_0.json"
    part.parent.mkdir(parents=True)
    texts = []
    for i in range(rows):
        b64 = base64.b64encode(padded_jpeg(i, image_bytes)).decode()
        text = json.dumps(record(i))
        texts.append(text[:1] + f'"image": "{b64}", ' + text[1:])
    part.write_text("[\n" + ",\n".join(texts) + "\n]\n", encoding="utf-8")
    return {str(i): len(t) for i, t in enumerate(texts)}


def evalkit(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """`evalkit ARGS` in a child process: (exit code, stderr, bytes it read)."""
    return run_counting_reads([*args, "--no-progress", "--no-plots"], cwd, env)


def here(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`evalkit ARGS` in this process (for the tests that count no bytes): (exit code, stderr)."""
    proc = run_main([*args, "--no-progress"], env=env, cwd=cwd)
    return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def sim():
    with SimThread(SimConfig()) as s:
        yield s


def run_args(data: Path | str, sim: SimThread, cache: Path, *more: str) -> list[str]:
    return ["run", "mme-realworld", "--data", str(data), "--model", "vllm/sim-model", "--base-url", sim.url,
            "--cache-dir", str(cache), *more]


def identity(out: Path) -> dict:
    return json.loads((out / "config.json").read_text())["identity"]


def answers(out: Path) -> dict[str, tuple]:
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    return {r["query_id"]: (r["request_key"], r["prompt"], r["gold"], r["response"]) for r in lines}


def test_the_second_run_reads_the_index_not_the_file_and_is_the_same_run(tmp_path, sim):
    sizes = write_parts(tmp_path / "data", rows=120, image_bytes=400_000)
    size = sum(sizes.values())
    assert size > 60e6
    cache = tmp_path / "cache"
    code, err, first = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "2", "--out", "o1"), tmp_path)
    assert code == 0, err
    assert first > size  # the first run reads the file (once: it is hashed as it is read)
    code, err, second = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "2", "--out", "o2"), tmp_path)
    assert code == 0, err
    # the index, two images and the interpreter's own files: not the 60 MB again
    assert second < size / 4, f"the second run read {second:,} bytes of a {size:,}-byte data file"
    assert identity(tmp_path / "o1") == identity(tmp_path / "o2")
    assert answers(tmp_path / "o1") == answers(tmp_path / "o2")
    # without the index (EVALKIT_DATA_INDEX=0): the same identity, default run directory, keys and records
    code, err, _ = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "2"), tmp_path)
    assert code == 0, err
    code, err, unindexed = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "2"), tmp_path,
                                   {"EVALKIT_DATA_INDEX": "0"})
    assert code == 0, err
    assert unindexed > size  # read whole again: the switch works
    runs = list((tmp_path / "runs").rglob("config.json"))
    assert len(runs) == 1, runs  # the indexed run and the unindexed one are one run directory
    assert identity(runs[0].parent) == identity(tmp_path / "o1")
    assert answers(runs[0].parent) == answers(tmp_path / "o1")
    assert len(list((cache / "data-index").glob("*.idx"))) == 1


def test_a_shard_reads_about_its_items_bytes_only(tmp_path, sim):
    sizes = write_parts(tmp_path / "data", rows=200, image_bytes=150_000)
    size = sum(sizes.values())
    cache = tmp_path / "cache"
    code, err, _ = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "1", "--out", "o1"), tmp_path)
    assert code == 0, err  # (the first run reads the file and indexes it)
    # what a run of the same command reads besides its items (the interpreter's files, the index, ...):
    # a --limit 10 run's bytes less its 10 items'
    code, err, base = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "10", "--out", "o2"), tmp_path)
    assert code == 0, err
    assert base < size / 2, f"a --limit 10 run read {base:,} bytes of a {size:,}-byte file"  # not the file again
    overhead = base - sum(sizes[str(i)] for i in range(10))
    code, err, shard = evalkit(run_args(tmp_path / "data", sim, cache, "--shard", "1/10", "--out", "s1"), tmp_path)
    assert code == 0, err
    ids = [i for i in sizes if int.from_bytes(hashlib.sha256(i.encode()).digest()[:8], "big") % 10 == 0]  # shard 1
    assert len(answers(tmp_path / "s1")) == len(ids) > 5
    items = sum(sizes[i] for i in ids)
    assert shard - overhead < size / 4, f"--shard 1/10 read {shard - overhead:,} bytes of a {size:,}-byte file"
    index = sum(p.stat().st_size for p in (cache / "data-index").glob("*.idx"))
    assert shard - overhead <= 1.1 * (items + index), (
        f"--shard 1/10 read {shard - overhead:,} bytes for {items:,} bytes of its items and a {index:,}-byte index")


def test_answers_found_again_read_no_image(tmp_path, sim):
    """A run whose answers are all known (a resume, the same questions under another --out) checks each
    answer's request key, which holds its image's sha256: kept with the index, not read again."""
    sizes = write_parts(tmp_path / "data", rows=60, image_bytes=300_000)
    cache = tmp_path / "cache"
    code, err, _ = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "30", "--out", "o1"), tmp_path)
    assert code == 0, err
    code, err, thirty = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "30", "--out", "o2"), tmp_path)
    assert code == 0, err
    code, err, one = evalkit(run_args(tmp_path / "data", sim, cache, "--limit", "1", "--out", "o3"), tmp_path)
    assert code == 0, err
    assert answers(tmp_path / "o2") == answers(tmp_path / "o1")  # every answer found, none asked again
    images = sum(sizes[str(i)] for i in range(1, 30))
    assert thirty - one < images / 10, f"29 answers more read {thirty - one:,} bytes ({images:,} of their images)"
    assert len(list((cache / "data-index").glob("*.images.json"))) == 1  # kept beside the index


def test_a_file_rewritten_with_the_same_size_is_read_again(tmp_path, sim):
    data = tmp_path / "data" / "mme.tsv"
    mme_tsv(data, rows=30, image_bytes=20_000, categories=CATEGORIES)
    cache = tmp_path / "cache"
    code, err = here(run_args(data, sim, cache, "--out", "o1"), tmp_path)
    assert code == 0, err
    before = data.stat()
    mme_tsv(data, rows=30, image_bytes=20_000, categories=CATEGORIES, answer_shift=1)  # other gold letters, same size
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000_000))
    assert data.stat().st_size == before.st_size
    code, err = here(run_args(data, sim, cache, "--out", "o2"), tmp_path)
    assert code == 0, err
    assert "changed since it was indexed" in err
    golds = {q: a[2] for q, a in answers(tmp_path / "o2").items()}
    assert golds == {str(i): "ABCDE"[(i + 1) % 5] for i in range(30)}  # the file's new answers
    code, err = here(run_args(data, sim, cache, "--out", "o3"), tmp_path, {"EVALKIT_DATA_INDEX": "0"})
    assert code == 0, err
    assert answers(tmp_path / "o3") == answers(tmp_path / "o2")
    assert identity(tmp_path / "o3") == identity(tmp_path / "o2") != identity(tmp_path / "o1")


def test_a_damaged_index_is_rebuilt_with_a_note(tmp_path, sim):
    data = tmp_path / "data" / "mme.tsv"
    mme_tsv(data, rows=20, image_bytes=20_000, categories=CATEGORIES)
    cache = tmp_path / "cache"
    code, err = here(run_args(data, sim, cache, "--out", "o1"), tmp_path)
    assert code == 0, err
    [index] = (cache / "data-index").glob("*.idx")
    whole = index.read_bytes()
    for out, damage in (("o2", whole[: len(whole) // 2]), ("o3", whole.replace(b'"Question 3', b'"Question 9'))):
        index.write_bytes(damage)  # cut short; or edited, its checksum no longer matching
        code, err = here(run_args(data, sim, cache, "--out", out), tmp_path)
        assert code == 0, err
        assert "was damaged" in err and str(data) in err
        assert answers(tmp_path / out) == answers(tmp_path / "o1")
        assert index.read_bytes() == whole  # rebuilt
    code, err = here(run_args(data, sim, cache, "--out", "o4"), tmp_path)
    assert code == 0 and "index" not in err, err


REPO = "test-owner/mme-base64"


def test_a_hub_source_keeps_its_index_beside_the_hub_cache(tmp_path, sim, hub):
    sizes = write_parts(tmp_path / "src", rows=160, image_bytes=400_000)
    size = sum(sizes.values())
    name = "MME-RealWorld/MME_RealWorld_base64_0.json"
    hub.add_commit(REPO, {name: (tmp_path / "src" / name).read_bytes()}, lfs=[name])
    code, err, first = evalkit(run_args(f"hf://{REPO}", sim, tmp_path / "c1", "--limit", "2", "--out", "o1"), tmp_path)
    assert code == 0, err
    # another cache folder: neither its file-hash memo nor its lint helps; the index beside the Hub cache does
    code, err, second = evalkit(run_args(f"hf://{REPO}", sim, tmp_path / "c2", "--limit", "2", "--out", "o2"),
                                tmp_path)
    assert code == 0, err
    assert second < size / 4, f"the second run read {second:,} bytes of a {size:,}-byte data file"
    assert identity(tmp_path / "o1") == identity(tmp_path / "o2")
    assert answers(tmp_path / "o1") == answers(tmp_path / "o2")
    repo_cache = next((tmp_path / "hf" / "hub").rglob(f"datasets--{REPO.replace('/', '--')}"))
    assert len(list((repo_cache / "evalkit-index").glob("*.idx"))) == 1
    assert not (tmp_path / "c1" / "data-index").exists()  # a registered source's index is not the cache folder's
