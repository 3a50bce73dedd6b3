"""A Hub that is a mirror, a proxy or hostile, from the command line: a listing without hashes reads
the same twice (pinned by the sha256 of the first download, said once), a call that never answers
and a body that stalls end in one line within the client's timeout, a file name leading out of the
dataset and a commit id that is not one are refused before anything is written, and an md5 that is
not the published one names the ways on. Each stand-in fault is synchronised on an event; the
client's timeout is made small with EVALKIT_HUB_TIMEOUT, never raced."""

from __future__ import annotations

import hashlib

import pytest
from cli_under_test import run_cli
from hub_standin import HubStandin

from evalkit.core.resources import dataset_path
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

REPO = "me/my-set"
MCQ = dataset_path("demo", "mcq.tsv")


def mcq_files() -> dict[str, bytes]:
    data = MCQ.read_bytes()
    return {"mcq.tsv": data, "notes/readme.txt": b"a second file\n"}


def one_line(stderr: str) -> str:
    """The one line an error is (the download bar's line, off a terminal, aside)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip() and not line.startswith("evalkit: downloading")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def cached_names(tmp_path) -> list[str]:
    """Every file and folder the Hub cache holds (empty folders included)."""
    root = tmp_path / "hf" / "hub"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def proxy(monkeypatch, tmp_path):
    """A Hub mirror whose listing gives names and sizes but no hashes."""
    with HubStandin(no_hashes=True) as standin:
        standin.activate(monkeypatch, tmp_path / "hf")
        monkeypatch.chdir(tmp_path)
        yield standin


def test_a_listing_without_hashes_reads_the_same_twice_pinned_by_the_first_download(proxy, tmp_path):
    proxy.add_commit(REPO, mcq_files(), lfs=["mcq.tsv"])
    first = run_cli(["data", "pull", f"hf://{REPO}"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert proxy.downloads() == 2
    again = run_cli(["data", "pull", f"hf://{REPO}"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # 0.3.0: "the cached copy … is not the Hub's ()", exit 2
    assert proxy.downloads() == 2  # 0 downloads the second time
    said = first.stdout + first.stderr
    assert said.count("lists no hashes") == 1, said  # said once for the source, not once per file
    assert ", checked" not in first.stdout and "pinned by the sha256 of their first download" in first.stdout
    data = f"hf://{REPO}/mcq.tsv"
    key = answer_key_for("mcq", {"data": str(MCQ)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        args = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", data,
                "--cache-dir", "cache", "--no-progress"]
        run = run_cli(args, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        asked = sim.counters.snapshot()["requests"]
        rerun = run_cli(args, cwd=tmp_path)
        assert rerun.returncode == 0, rerun.stderr  # the same command twice: exit 0, 0 downloads, 0 requests
        assert sim.counters.snapshot()["requests"] == asked and proxy.downloads() == 2
    assert run.stderr.count("lists no hashes") == 1
    # what the first download recorded is what every later read is checked against
    blob = (tmp_path / "hf" / "hub").rglob("snapshots/*/mcq.tsv").__next__().resolve()
    blob.write_bytes(blob.read_bytes().replace(b"A", b"B", 1))
    damaged = run_cli(["data", "pull", f"hf://{REPO}"], cwd=tmp_path)
    assert damaged.returncode == 2
    line = one_line(damaged.stderr)
    assert "mcq.tsv: sha256" in line and hashlib.sha256(MCQ.read_bytes()).hexdigest() in line
    assert "first download" in line


def test_a_metadata_call_that_never_answers_is_one_line_within_the_timeout(hub, tmp_path):
    hub.add_commit(REPO, mcq_files())
    hub.hold_metadata()
    done = run_cli(["data", "pull", f"hf://{REPO}"], cwd=tmp_path, env={"EVALKIT_HUB_TIMEOUT": "0.5"}, timeout=90)
    assert hub.metadata_held.is_set()  # the stand-in had the request, and never answered it
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert f"hf://{REPO}" in line and hub.url in line and "EVALKIT_HUB_TIMEOUT" in line and "0.5 s" in line
    assert hub.downloads() == 0


def test_a_file_body_that_stalls_is_one_line_within_the_timeout(hub, tmp_path):
    hub.add_commit(REPO, mcq_files())
    hub.stall(REPO, "mcq.tsv", after=100)  # the first 100 bytes, then nothing: every attempt alike
    done = run_cli(["data", "pull", f"hf://{REPO}/mcq.tsv"], cwd=tmp_path, env={"EVALKIT_HUB_TIMEOUT": "0.5"},
                   timeout=90)
    assert hub.stalled.is_set()
    assert done.returncode == 2
    line = one_line(done.stderr)  # 0.3.0: chained ReadTimeout tracebacks
    assert "mcq.tsv" in line and "EVALKIT_HUB_TIMEOUT" in line and "run again" in line
    assert hub.downloads("mcq.tsv") == 1  # given up at the first silence, not resumed again and again


def test_a_file_name_leading_out_of_the_dataset_is_refused_before_any_download(hub, tmp_path):
    hub.add_commit(REPO, {**mcq_files(), "../../outside.tsv": b"index\tquestion\n"})
    done = run_cli(["data", "pull", f"hf://{REPO}"], cwd=tmp_path)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert "../../outside.tsv" in line and f"/api/datasets/{REPO}/revision/main" in line
    assert hub.downloads() == 0 and not (tmp_path / "outside.tsv").exists()


@pytest.mark.parametrize("shown", ["upper", "short", "space", "path"])
def test_a_commit_id_that_is_not_one_is_refused_before_anything_is_written(hub, tmp_path, shown):
    commit = hub.add_commit(REPO, mcq_files())
    bad = {"upper": commit.upper(), "short": commit[:39], "space": commit + " ", "path": "../../../escaped"}[shown]
    hub.show_commit(REPO, bad)  # a mirror with ids of its own: it serves its files under this id too
    done = run_cli(["data", "pull", f"hf://{REPO}"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    line = one_line(done.stderr)
    assert f"{hub.url}/api/datasets/{REPO}/revision/main" in line and "commit id" in line
    assert hub.downloads() == 0
    assert [n for n in cached_names(tmp_path) if "refs" in n or "snapshots" in n or "escaped" in n] == []


REGISTRY = '''[[source]]
bench = "tdbench"
name = "tdbench"
kind = "hub"
repo = "Columbia-ICSL/TDBench"
revision = "main"
read = "2026-11-26"
layout = "test"
checksums = "md5"
checksum_source = "VLMEvalKit's TDBench.DATASET_MD5, vlmeval/dataset/image_mcq.py @e8e78f05f308"
[[source.files]]
path = "tdbench_rot0.tsv"
md5 = "{md5}"
when = {{ td_set = ["all", "main"] }}
'''


def test_an_md5_refusal_of_official_data_names_the_ways_on(hub, tmp_path):
    tsv = dataset_path("tdbench", "tdbench_rot0.tsv").read_bytes()
    hub.add_commit("Columbia-ICSL/TDBench", {"tdbench_rot0.tsv": tsv}, lfs=["tdbench_rot0.tsv"])
    published = "0123456789abcdef0123456789abcdef"
    (tmp_path / "registry.toml").write_text(REGISTRY.format(md5=published))
    done = run_cli(["data", "pull", "tdbench", "--td-set", "main"], cwd=tmp_path,
                   env={"EVALKIT_REGISTRY": str(tmp_path / "registry.toml")})
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert hashlib.md5(tsv).hexdigest() in line and published in line
    assert "VLMEvalKit's TDBench.DATASET_MD5, vlmeval/dataset/image_mcq.py @e8e78f05f308" in line  # its source
    assert "`evalkit data verify tdbench`" in line and "--data PATH" in line and "EVALKIT_REGISTRY" in line
