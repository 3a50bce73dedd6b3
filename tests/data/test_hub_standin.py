"""The stand-ins speak the protocols their real clients expect: huggingface_hub 2.x itself (not a mock of
it) lists, downloads, caches, resumes and refuses against HubStandin exactly as against the Hub."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx2
import pytest
from git_standin import GitFilesStandin
from hub_standin import HubStandin
from huggingface_hub import HfApi, constants, file_download, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder
from standin_base import git_blob_id

REPO = "evalkit-test/tiny"
CARD = b"---\nlicense: mit\n---\n# tiny\n"
ROWS = b'{"id": 1}\n{"id": 2}\n'
IMAGE = bytes(range(256)) * 40  # 10 240 bytes, stored as LFS
SHA_IMAGE = hashlib.sha256(IMAGE).hexdigest()
STORAGE = f"datasets--{REPO.replace('/', '--')}"  # the repo's folder in the cache


@pytest.fixture(autouse=True)
def no_ambient_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A developer's HF_TOKEN or saved login must never reach the stand-in (nor change its answers)."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # else the first request of the process fetches huggingface.co/api/agent-harnesses for the User-Agent
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)


@pytest.fixture
def hub() -> Iterator[HubStandin]:
    with HubStandin() as h:
        yield h
    assert not h.errors


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "hub-cache"


def commit_v1(hub: HubStandin) -> str:
    return hub.add_commit(REPO, {"README.md": CARD, "data/rows.jsonl": ROWS, "data/img.png": IMAGE},
                          lfs={"data/img.png"})


def download(hub: HubStandin, cache: Path, filename: str, **kw: object) -> Path:
    return Path(hf_hub_download(REPO, filename, repo_type="dataset", endpoint=hub.url, cache_dir=cache,
                                **kw))  # type: ignore[arg-type]


def test_dataset_info_with_files_metadata(hub: HubStandin) -> None:
    sha = commit_v1(hub)
    api = HfApi(endpoint=hub.url, token=False)
    info = api.dataset_info(REPO, revision="main", files_metadata=True)
    assert info.id == REPO and info.sha == sha and info.gated is False
    files = {s.rfilename: s for s in info.siblings or []}
    assert set(files) == {"README.md", "data/rows.jsonl", "data/img.png"}
    assert (files["README.md"].size, files["README.md"].blob_id, files["README.md"].lfs) == (
        len(CARD), git_blob_id(CARD), None)
    lfs = files["data/img.png"].lfs
    assert lfs is not None and lfs.size == len(IMAGE) == files["data/img.png"].size
    assert lfs.sha256 == SHA_IMAGE and lfs.pointer_size > 100
    # without files_metadata the Hub lists names only; by sha the same commit answers
    plain = api.dataset_info(REPO, revision=sha)
    assert plain.sha == sha and {s.size for s in plain.siblings or []} == {None}
    assert [(m, p) for m, p, _ in hub.requests] == [("GET", f"/api/datasets/{REPO}/revision/main"),
                                                     ("GET", f"/api/datasets/{REPO}/revision/{sha}")]


def test_list_repo_tree_recursive_follows_link_pages() -> None:
    with HubStandin(page_size=2) as hub:
        commit_v1(hub)
        api = HfApi(endpoint=hub.url, token=False)
        entries = list(api.list_repo_tree(REPO, repo_type="dataset", revision="main", recursive=True))
        tree_calls = [p for m, p, _ in hub.requests if p == f"/api/datasets/{REPO}/tree/main"]
        top = list(api.list_repo_tree(REPO, repo_type="dataset", revision="main"))
        inside = list(api.list_repo_tree(REPO, "data", repo_type="dataset", revision="main"))
    assert len(tree_calls) == 2  # 4 entries, 2 a page: the Link header was followed
    files = {e.path: e for e in entries if isinstance(e, RepoFile)}
    assert [e.path for e in entries if isinstance(e, RepoFolder)] == ["data"]
    assert set(files) == {"README.md", "data/rows.jsonl", "data/img.png"}
    assert files["data/rows.jsonl"].blob_id == git_blob_id(ROWS) and files["data/rows.jsonl"].lfs is None
    img = files["data/img.png"]
    assert img.size == len(IMAGE) and img.lfs is not None and img.lfs.size == len(IMAGE)
    assert img.blob_id != git_blob_id(IMAGE)  # an LFS file's git oid is its pointer's
    assert sorted(e.path for e in top) == ["README.md", "data"]
    assert sorted(e.path for e in inside) == ["data/img.png", "data/rows.jsonl"]


def test_hf_hub_download_caches_as_snapshot_symlinks_into_blobs(hub: HubStandin, cache: Path) -> None:
    sha = commit_v1(hub)
    img = download(hub, cache, "data/img.png", revision="main")
    rows = download(hub, cache, "data/rows.jsonl", revision="main")
    for path, data, blob in ((img, IMAGE, SHA_IMAGE), (rows, ROWS, git_blob_id(ROWS))):
        assert path.is_relative_to(cache / STORAGE / "snapshots" / sha)
        assert path.is_symlink() and Path(os.path.realpath(path)).parent.name == "blobs"
        assert Path(os.path.realpath(path)).name == blob  # blobs are named by the (normalised) ETag
        assert path.read_bytes() == data
    assert (cache / STORAGE / "refs" / "main").read_text() == sha
    assert hub.downloads() == 2
    # a second call by branch asks HEAD only; by commit sha it asks nothing at all
    assert download(hub, cache, "data/img.png", revision="main") == img
    assert download(hub, cache, "data/img.png", revision=sha) == img
    assert hub.downloads() == 2
    assert [m for m, _, _ in hub.requests] == ["HEAD", "GET", "HEAD", "GET", "HEAD"]


def test_an_old_commit_keeps_its_bytes_after_main_moves(hub: HubStandin, cache: Path) -> None:
    old = commit_v1(hub)
    assert download(hub, cache, "data/rows.jsonl").read_bytes() == ROWS
    new = hub.add_commit(REPO, {"data/rows.jsonl": b'{"id": 3}\n'})
    assert new != old and hub.head(REPO) == new
    assert download(hub, cache, "data/rows.jsonl", revision=old).read_bytes() == ROWS
    assert download(hub, cache, "data/rows.jsonl").read_bytes() == b'{"id": 3}\n'
    with pytest.raises(RemoteEntryNotFoundError):  # gone from main, still in the old commit
        download(hub, cache, "data/img.png")
    assert download(hub, cache, "data/img.png", revision=old).read_bytes() == IMAGE


def test_unknown_repo_revision_and_file_raise_the_hub_errors(hub: HubStandin, cache: Path) -> None:
    commit_v1(hub)
    api = HfApi(endpoint=hub.url, token=False)
    with pytest.raises(RepositoryNotFoundError) as missing:
        api.dataset_info("evalkit-test/nope", revision="main")
    assert missing.value.response.status_code == 401  # anonymous: the Hub will not say whether it exists
    with pytest.raises(RevisionNotFoundError):
        download(hub, cache, "README.md", revision="v9")
    with pytest.raises(RemoteEntryNotFoundError):
        download(hub, cache, "absent.txt")
    assert hub.requests[-1] == ("HEAD", f"/datasets/{REPO}/resolve/main/absent.txt", None)


def test_gated_repo_answers_like_the_hub(hub: HubStandin, cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    commit_v1(hub)
    hub.gate(REPO)
    api = HfApi(endpoint=hub.url, token=False)
    assert api.dataset_info(REPO).gated == "auto"  # the repo page is public, its contents are not
    with pytest.raises(GatedRepoError) as anonymous:
        download(hub, cache, "README.md", token=False)
    assert anonymous.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as other:
        download(hub, cache, "README.md", token="hf_someone_else")
    assert other.value.response.status_code == 403
    with pytest.raises(GatedRepoError):
        api.dataset_info(REPO, revision="main", files_metadata=True)
    with pytest.raises(GatedRepoError):
        list(api.list_repo_tree(REPO, repo_type="dataset", recursive=True))
    assert download(hub, cache, "README.md", token=hub.token).read_bytes() == CARD
    assert hub.log[-1].authorization == f"Bearer {hub.token}"
    # huggingface_hub 2.4: a refusal with a copy in the cache is not an error, and is not logged either
    caplog.set_level(logging.DEBUG, logger="huggingface_hub")
    assert download(hub, cache, "README.md", token=False).read_bytes() == CARD
    assert hub.log[-1].status == 401
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


def test_snapshot_download_then_offline_by_commit(hub: HubStandin, cache: Path) -> None:
    sha = commit_v1(hub)
    folder = Path(snapshot_download(REPO, repo_type="dataset", revision="main", endpoint=hub.url,
                                    cache_dir=cache, max_workers=2))
    assert folder.name == sha and (folder / "data" / "img.png").read_bytes() == IMAGE
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "README.md", "data/img.png", "data/rows.jsonl"]
    assert hub.downloads() == 3
    assert [p for m, p, _ in hub.requests if m == "GET" and "/api/" in p] == [
        f"/api/datasets/{REPO}/revision/main", f"/api/datasets/{REPO}/tree/{sha}"]
    hub.clear()
    snapshot_download(REPO, repo_type="dataset", revision=sha, endpoint=hub.url, cache_dir=cache)
    assert hub.requests == []  # pinned and complete: the tree and every file come from the cache


def test_interrupted_download_resumes_with_a_range_request(hub: HubStandin, cache: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A cut mid-body is retried within the same call from the last whole chunk written: Range -> 206.
    Chunks are 10 MiB (constants.DOWNLOAD_CHUNK_SIZE), shrunk here so a small file spans several."""
    commit_v1(hub)
    caplog.set_level(logging.WARNING, logger="huggingface_hub")  # whatever an earlier test left it at
    pauses: list[float] = []
    monkeypatch.setattr(file_download, "time", SimpleNamespace(sleep=pauses.append))  # its 1 s pause before resuming
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1000)
    hub.interrupt_next(REPO, "data/img.png", after=4500)
    assert download(hub, cache, "data/img.png").read_bytes() == IMAGE
    gets = [(h.range, h.status, h.sent) for h in hub.log if h.method == "GET"]
    assert gets == [(None, 200, 4500), ("bytes=4000-", 206, len(IMAGE) - 4000)]  # 500 bytes were in no whole chunk
    assert pauses == [1]
    assert any("Trying to resume download" in r.getMessage() for r in caplog.records)


def test_a_cut_inside_the_first_chunk_refetches_the_whole_file(hub: HubStandin, cache: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With the real 10 MiB chunks, a file cut before its first 10 MiB arrived is asked for again from byte 0."""
    commit_v1(hub)
    monkeypatch.setattr(file_download, "time", SimpleNamespace(sleep=lambda _s: None))
    hub.interrupt_next(REPO, "data/img.png", after=4000)
    assert download(hub, cache, "data/img.png").read_bytes() == IMAGE
    assert [(h.range, h.sent) for h in hub.log if h.method == "GET"] == [(None, 4000), (None, len(IMAGE))]


def test_a_leftover_incomplete_file_is_not_resumed(hub: HubStandin, cache: Path) -> None:
    """huggingface_hub 2.4 downloads into a process-unique ``<etag>.<random>.incomplete`` and deletes it on
    failure: a partial file left by an earlier process is ignored, the whole file is fetched again."""
    commit_v1(hub)
    blobs = cache / STORAGE / "blobs"
    blobs.mkdir(parents=True)
    leftover = blobs / f"{SHA_IMAGE}.incomplete"
    leftover.write_bytes(IMAGE[:4000])
    assert download(hub, cache, "data/img.png").read_bytes() == IMAGE
    assert [(h.range, h.sent) for h in hub.log if h.method == "GET"] == [(None, len(IMAGE))]
    assert leftover.exists()  # left as it was


def test_resolve_answers_ranges_and_heads_over_plain_http(hub: HubStandin) -> None:
    sha = commit_v1(hub)
    url = f"{hub.url}/datasets/{REPO}/resolve/{sha}/data/img.png"
    with httpx2.Client() as http:
        head = http.head(url)
        part = http.get(url, headers={"Range": "bytes=10-19"})
        tail = http.get(url, headers={"Range": "bytes=-5"})
        beyond = http.get(url, headers={"Range": f"bytes={len(IMAGE)}-"})
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Length"] == head.headers["X-Linked-Size"] == str(len(IMAGE))
    assert head.headers["ETag"] == head.headers["X-Linked-Etag"] == f'"{SHA_IMAGE}"'
    assert head.headers["X-Repo-Commit"] == sha
    assert not [k for k in head.headers if k.lower().startswith("x-xet")]  # so huggingface_hub uses plain HTTP
    assert (part.status_code, part.headers["Content-Range"], part.content) == (
        206, f"bytes 10-19/{len(IMAGE)}", IMAGE[10:20])
    assert (tail.status_code, tail.content) == (206, IMAGE[-5:])
    assert (beyond.status_code, beyond.headers["Content-Range"]) == (416, f"bytes */{len(IMAGE)}")
    assert hub.downloads() == 2 and hub.downloads("data/img.png") == 2


def test_lfs_redirect_goes_to_the_cdn_without_the_token(cache: Path) -> None:
    with HubStandin(lfs_redirect=True) as hub:
        commit_v1(hub)
        hub.gate(REPO)
        path = download(hub, cache, "data/img.png", token=hub.token)
        readme = download(hub, cache, "README.md", token=hub.token)
    assert path.read_bytes() == IMAGE and readme.read_bytes() == CARD
    head, get = hub.log[0], hub.log[1]
    assert (head.method, head.status, head.authorization) == ("HEAD", 302, f"Bearer {hub.token}")
    assert get.method == "GET" and get.path.endswith(SHA_IMAGE) and get.authorization is None
    assert get.served and hub.downloads("data/img.png") == 1


def hashlib_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_activate_points_huggingface_hub_at_the_standin(hub: HubStandin, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sha = commit_v1(hub)
    home = tmp_path / "hf-home"
    hub_cache = hub.activate(monkeypatch, home)
    path = Path(hf_hub_download(REPO, "README.md", repo_type="dataset"))  # no endpoint, cache_dir nor token
    assert path.read_bytes() == CARD and path.is_relative_to(hub_cache / STORAGE)
    assert HfApi().dataset_info(REPO).sha == sha
    assert os.environ["HF_ENDPOINT"] == hub.url and os.environ["HF_HOME"] == str(home)
    assert all(h.authorization is None for h in hub.log)


def test_git_files_standin_serves_raw_files_by_commit_and_branch() -> None:
    with GitFilesStandin() as git, httpx2.Client() as http:
        old = git.add_commit("allenai/IFBench", {"data/test.jsonl": b"one\n", "README.md": b"# IFBench\n"})
        new = git.add_commit("allenai/IFBench", {"data/test.jsonl": b"two\n"})
        base = f"{git.url}/allenai/IFBench"
        by_old, by_branch = http.get(f"{base}/{old}/data/test.jsonl"), http.get(f"{base}/main/data/test.jsonl")
        part = http.get(f"{base}/{new}/data/test.jsonl", headers={"Range": "bytes=1-"})
        gone = http.get(f"{base}/{new}/README.md")
        head = http.head(f"{base}/{old}/README.md")
        git.interrupt_next("allenai/IFBench", "data/test.jsonl", after=2)
        with pytest.raises(httpx2.RemoteProtocolError):
            http.get(f"{base}/{new}/data/test.jsonl")
    assert (by_old.status_code, by_old.content) == (200, b"one\n")
    assert by_branch.content == b"two\n" and by_branch.headers["Content-Type"].startswith("text/plain")
    assert (part.status_code, part.content, part.headers["Content-Range"]) == (206, b"wo\n", "bytes 1-3/4")
    assert (gone.status_code, gone.text) == (404, "404: Not Found")
    assert head.headers["Content-Length"] == "10" and head.content == b""
    assert git.downloads() == 4 and git.downloads("data/test.jsonl") == 4
    assert git.requests[0] == ("GET", f"/allenai/IFBench/{old}/data/test.jsonl", None)
    assert git.log[-1].sent == 2
