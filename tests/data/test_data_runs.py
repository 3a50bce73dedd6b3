"""Whole runs on data from a source: a repository's files at a commit (RGB-Th-Bench's mirror), two
sources for one benchmark (IF-Bench's questions from GitHub, its images from the Hub), a Hub folder
with images, the sample labelled, and the same command again asking and downloading nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from git_standin import GitFilesStandin
from hub_standin import HubStandin

from evalkit import run
from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.data.request import DataRequest
from evalkit.data.resolve import resolve_source
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

MIRROR = "huhanwj/RGB-Th-Benchmark"
IFB_GIT, IFB_HUB = "casiatao/IF-Bench", "casiatao/IF-Bench"


def tree(folder: Path, prefix: str = "") -> dict[str, bytes]:
    return {prefix + p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.suffix != ".py" and not p.name.startswith(".")}


@pytest.fixture
def sources(monkeypatch, tmp_path):
    with HubStandin() as hub, GitFilesStandin() as git:
        hub.activate(monkeypatch, tmp_path / "hf")
        monkeypatch.setenv("EVALKIT_GITHUB_API", git.api_url)
        monkeypatch.setenv("EVALKIT_GITHUB_RAW", git.url)
        monkeypatch.setenv("EVALKIT_DATA_CACHE", str(tmp_path / "evalkit-data"))
        monkeypatch.chdir(tmp_path)
        yield hub, git


def registry(tmp_path: Path, text: str, monkeypatch) -> None:
    path = tmp_path / "registry.toml"
    path.write_text(text)
    monkeypatch.setenv("EVALKIT_REGISTRY", str(path))


RGBTH = f'''
[[source]]
bench = "rgb-th-bench"
name = "rgb-th-bench"
kind = "git"
repo = "{MIRROR}"
revision = "main"
read = "2026-11-26"
layout = "test"
checksums = "git-blob"
root = "RGB-Th-Bench/Data"
[[source.files]]
path = "RGB-Th-Bench/Data/"
'''

IFBENCH = f'''
[[source]]
bench = "if-bench"
name = "if-bench"
kind = "git"
repo = "{IFB_GIT}"
revision = "main"
read = "2026-11-26"
layout = "test"
checksums = "git-blob"
root = "evaluate/if_bench"
[[source.files]]
path = "evaluate/if_bench/if_bench.json"

[[source]]
bench = "if-bench"
name = "if-bench-images"
kind = "hub"
repo = "{IFB_HUB}"
revision = "main"
read = "2026-11-26"
layout = "test"
checksums = "first-download"
root = "infrared_imgs"
role = "images"
[[source.files]]
path = "infrared_imgs/"
'''


def test_a_repository_mirror_at_a_commit_with_spaces_in_its_paths(sources, tmp_path, monkeypatch):
    hub, git = sources
    sample = dataset_path("rgb-th-bench")
    commit = git.add_commit(MIRROR, tree(sample, "RGB-Th-Bench/Data/") | {"README.md": b"mirror"})
    registry(tmp_path, RGBTH, monkeypatch)
    first = resolve_source(DataRequest("rgb-th-bench", None, {}, dict(os.environ)))
    assert first.source.kind == "archive" and first.source.commit == commit
    assert first.path.name == "Data" and (first.path / "Source 1").is_dir()  # a folder name with a space
    assert sorted(first.source.files) == sorted(tree(sample, "RGB-Th-Bench/Data/"))  # README.md not fetched
    downloads = git.downloads()
    assert downloads == len(first.source.files)
    again = resolve_source(DataRequest("rgb-th-bench", None, {}, dict(os.environ)))
    assert again.source == first.source and git.downloads() == downloads  # nothing fetched twice
    bad = tree(sample, "RGB-Th-Bench/Data/")
    git.add_commit(MIRROR, bad)  # main moves: the tree names new blob ids, fetched and checked afresh
    moved = resolve_source(DataRequest("rgb-th-bench", None, {}, dict(os.environ)))
    assert moved.source.commit != commit and moved.source.files == first.source.files


def test_if_bench_questions_from_github_and_images_from_the_hub_load_together(sources, tmp_path, monkeypatch):
    hub, git = sources
    sample = dataset_path("if-bench")
    git.add_commit(IFB_GIT, {"evaluate/if_bench/if_bench.json": (sample / "if_bench_sample.json").read_bytes()})
    images = tree(sample / "infrared_imgs", "infrared_imgs/")
    hub.add_commit(IFB_HUB, images, lfs=list(images))
    registry(tmp_path, IFBENCH, monkeypatch)
    from evalkit.benchmarks.prepare import prepare

    got = prepare("if-bench", {"lang": "en"})
    want = prepare("if-bench", {"lang": "en", "data": "sample"})
    assert got.source.kind == "archive" and len(got.items) == len(want.items) > 0
    assert [q.id for q in got.queries] == [q.id for q in want.queries]
    sent = [Path(str(r.value)).read_bytes() for it in got.items for r in it.images]
    assert sent == [Path(str(r.value)).read_bytes() for it in want.items for r in it.images]
    assert all("/snapshots/" in str(r.value) for it in got.items for r in it.images)  # through the cache's links


def test_cli_run_on_a_hub_folder_with_images_then_the_same_command_is_free(sources, tmp_path):
    hub, _ = sources
    demo = dataset_path("demo")
    files = {"mcq.tsv": (demo / "mcq.tsv").read_bytes()}
    hub.add_commit("me/my-set", files)
    data = "hf://me/my-set/mcq.tsv"
    key = answer_key_for("mcq", {"data": str(demo / "mcq.tsv")})
    with SimThread(SimConfig(answer_key=key)) as sim:
        res = run("mcq", "vllm/sim-model", data=data, base_url=sim.url, cache_dir=str(tmp_path / "cache"),
                  progress=False, plots=False)
        asked = sim.counters.snapshot()["requests"]
        downloads = hub.downloads()
        again = run("mcq", "vllm/sim-model", data=data, base_url=sim.url, cache_dir=str(tmp_path / "cache"),
                    progress=False, plots=False)
        assert sim.counters.snapshot()["requests"] == asked  # the same command again: 0 chat requests
        url = sim.url
    assert res.exit_code == 0 and again.exit_code == 0 and hub.downloads() == downloads == 1
    assert res.out_dir == again.out_dir and res.summary["metrics"] == again.summary["metrics"]
    source = res.summary["data_source"]
    assert source["kind"] == "hub" and source["uri"] == data and source["commit"] == hub.head("me/my-set")
    assert source["endpoint"] == hub.url and "files" not in source
    manifest = json.loads((res.out_dir / "manifest.json").read_text())
    assert list(manifest["data_source"]["files"]) == ["mcq.tsv"]
    local = run("mcq", "vllm/sim-model", data=str(demo / "mcq.tsv"), base_url=url,
                cache_dir=str(tmp_path / "cache"), progress=False, plots=False, dry_run=True)
    assert local.out_dir == res.out_dir  # the same bytes are the same run, wherever they came from


def test_the_bundled_sample_is_labelled_everywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    key = answer_key_for("tdbench", {"data": "sample", "limit": 2})
    with SimThread(SimConfig(answer_key=key)) as sim:
        res = run("tdbench", "vllm/sim-model", data="sample", limit=2, base_url=sim.url, progress=False,
                  plots=False, no_cache=True)
    assert res.exit_code == 0 and res.summary["data_source"]["kind"] == "sample"
    first = (res.out_dir / "report.md").read_text().splitlines()[0]
    assert first == "**Data: the bundled sample (2 items), not the benchmark.**"


def test_pope_without_data_names_the_way_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EvalkitError, match=r"--data PATH .*--data sample"):
        resolve_source(DataRequest("pope", None, {}, {}))
