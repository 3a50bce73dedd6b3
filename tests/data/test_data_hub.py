"""Datasets from the Hub, through the real huggingface_hub against a local stand-in of the Hub: pinned,
verified, cached per endpoint, refused in one line when they cannot be read."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from hub_standin import HubStandin

from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.data.lock import read_lock
from evalkit.data.request import DataRequest
from evalkit.data.resolve import resolve_source

REPO = "Columbia-ICSL/TDBench"
TSVS = sorted(p.name for p in dataset_path("tdbench").glob("tdbench_*.tsv"))


def tdbench_files() -> dict[str, bytes]:
    return {name: (dataset_path("tdbench") / name).read_bytes() for name in TSVS}


def write_registry(folder: Path, files: dict[str, bytes], *, md5_of=None) -> Path:
    """A registry naming the stand-in's repository as TDBench's source, with the md5s of `files`."""
    lines = ['[[source]]', 'bench = "tdbench"', 'name = "tdbench"', 'kind = "hub"', f'repo = "{REPO}"',
             'revision = "main"', 'read = "2026-11-26"', 'layout = "test"', 'checksums = "md5"']
    for name, data in files.items():
        md5 = (md5_of or (lambda n, d: hashlib.md5(d).hexdigest()))(name, data)
        when = '["all", "grounding"]' if "grounding" in name else '["all", "main"]'
        lines += ["[[source.files]]", f'path = "{name}"', f'md5 = "{md5}"', f"when = {{ td_set = {when} }}",
                  "questions = 300"]
    path = folder / "registry.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def request(data=None, *, bench="tdbench", options=None, **env_extra) -> DataRequest:
    env = {**os.environ, **env_extra}
    return DataRequest(bench, data, options or {}, env, default_sample="tdbench")


def test_official_source_downloads_once_then_reads_the_cache(hub, tmp_path, capfd):
    commit = hub.add_commit(REPO, tdbench_files(), lfs=TSVS)
    env = {"EVALKIT_REGISTRY": str(write_registry(tmp_path, tdbench_files()))}
    first = resolve_source(request(**env))
    assert capfd.readouterr() == ("", "")  # huggingface_hub's bars and logs silenced (no bar was asked for)
    assert first.source.kind == "hub" and first.source.commit == commit and first.source.uri == f"hf://{REPO}"
    port = hub.url.rsplit(":", 1)[1]  # another endpoint than huggingface.co: a cache of its own
    assert first.path == (tmp_path / "hf" / "hub" / "evalkit-endpoints" / f"127.0.0.1_{port}"
                          / f"datasets--{REPO.replace('/', '--')}" / "snapshots" / commit)
    assert sorted(first.source.files) == TSVS and hub.downloads() == len(TSVS)
    assert all((first.path / n).is_symlink() for n in TSVS)  # loaded through the links, never resolved
    assert first.source.files["tdbench_rot0.tsv"] == hashlib.sha256(tdbench_files()["tdbench_rot0.tsv"]).hexdigest()
    hub.clear()
    again = resolve_source(request(**env))
    assert again.source == first.source and hub.downloads() == 0
    assert [m for m, *_ in hub.requests] == ["GET"] and "/revision/" in hub.requests[0][1]  # one metadata request
    hub.clear()
    offline = resolve_source(request(HF_HUB_OFFLINE="1", **env))
    assert offline.source.commit == commit and offline.path == first.path and hub.requests == []
    main_only = resolve_source(request(options={"td_set": "main"}, **env))
    assert sorted(main_only.source.files) == [n for n in TSVS if "grounding" not in n]


def test_a_pinned_revision_and_a_lock_keep_the_old_bytes_after_main_moves(hub, tmp_path):
    old = hub.add_commit(REPO, tdbench_files(), lfs=TSVS)
    env = {"EVALKIT_REGISTRY": str(write_registry(tmp_path, tdbench_files()))}
    from evalkit.data.command import main as data_main

    class Args:
        action, targets, lock = "lock", ["tdbench"], None

    assert data_main(Args(), {**os.environ, **env}) == 0
    lock = read_lock(tmp_path / "evalkit.lock")
    assert lock is not None and [e["commit"] for e in lock.sources.values()] == [old]
    changed = {**tdbench_files(), "tdbench_rot0.tsv": tdbench_files()["tdbench_rot0.tsv"] + b"\n"}
    new = hub.add_commit(REPO, changed, lfs=TSVS)
    assert new != old
    locked = resolve_source(request(**env))  # ./evalkit.lock is read by itself
    assert locked.source.commit == old
    pinned = resolve_source(request(f"hf://{REPO}@{old}/tdbench_rot0.tsv"))
    assert pinned.source.commit == old and pinned.path.read_bytes() == tdbench_files()["tdbench_rot0.tsv"]
    (tmp_path / "evalkit.lock").unlink()
    with pytest.raises(EvalkitError, match=r"tdbench_rot0.tsv: md5 \w+ is not the published"):
        resolve_source(request(**env))  # main moved to bytes the registry's md5 does not know
    moved = resolve_source(request(f"hf://{REPO}"))
    assert moved.source.commit == new and (moved.path / "tdbench_rot0.tsv").read_bytes().endswith(b"\n")


def test_wrong_bytes_under_a_registry_entry_are_refused_and_not_kept(hub, tmp_path):
    hub.add_commit(REPO, tdbench_files(), lfs=TSVS)
    env = {"EVALKIT_REGISTRY": str(write_registry(tmp_path, tdbench_files(), md5_of=lambda n, d: "0" * 32))}
    with pytest.raises(EvalkitError, match=r"md5 [0-9a-f]{32} is not the published 0{32}") as e:
        resolve_source(request(**env))
    assert "\n" not in str(e.value)
    with pytest.raises(EvalkitError, match="is not the published"):
        resolve_source(request(**env))  # still refused: the bad file was not kept as if checked


def test_a_gated_dataset_without_a_token_is_one_line_even_when_cached(hub, tmp_path, monkeypatch):
    commit = hub.add_commit(REPO, tdbench_files(), lfs=TSVS)
    monkeypatch.setenv("HF_TOKEN", hub.token)
    resolve_source(request(f"hf://{REPO}"))  # cached with the token
    hub.gate(REPO)
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(EvalkitError, match="set HF_TOKEN") as e:
        resolve_source(request(f"hf://{REPO}"))
    assert "\n" not in str(e.value) and hub.token not in str(e.value)
    with pytest.raises(EvalkitError, match="HF_TOKEN was refused"):
        resolve_source(request(f"hf://{REPO}", HF_TOKEN="hf_wrong"))
    got = resolve_source(request(f"hf://{REPO}", HF_TOKEN=hub.token))
    assert got.source.commit == commit and hub.token not in repr(got)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and hub.token.encode() in p.read_bytes()]
    assert written == []  # no token on disk: not in the cache, the refs, the listing memo


def test_an_unreachable_hub_with_nothing_cached_is_one_line_in_seconds(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": ""}
    start = time.monotonic()
    with pytest.raises(EvalkitError) as e:
        resolve_source(DataRequest("tdbench", None, {}, env, default_sample="tdbench"))
    assert time.monotonic() - start < 10  # the behaviour under test: refused connections are not retried
    assert "cannot reach" in str(e.value) and "--data sample" in str(e.value) and "\n" not in str(e.value)


def test_files_cached_from_one_endpoint_are_not_another_endpoints(hub, tmp_path):
    hub.add_commit(REPO, tdbench_files(), lfs=TSVS)
    got = resolve_source(request(f"hf://{REPO}"))
    with HubStandin() as other:
        other.add_commit(REPO, {"tdbench_rot0.tsv": b"other"}, lfs=["tdbench_rot0.tsv"])
        there = resolve_source(request(f"hf://{REPO}", HF_ENDPOINT=other.url))
    assert there.path != got.path and sorted(there.source.files) == ["tdbench_rot0.tsv"]
    assert there.source.endpoint == other.url and got.source.endpoint == hub.url


def test_a_dry_run_prices_the_download_before_anything_is_downloaded(hub, tmp_path, capsys, monkeypatch):
    hub.add_commit(REPO, tdbench_files(), lfs=TSVS)
    monkeypatch.setenv("EVALKIT_REGISTRY", str(write_registry(tmp_path, tdbench_files())))
    from evalkit.cli import main

    code = main(["run", "tdbench", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9", "--dry-run",
                 "--limit", "3"])
    out = capsys.readouterr().out + capsys.readouterr().err
    size = sum(len(b) for b in tdbench_files().values())
    assert code == 0 and hub.downloads() == 0  # priced from the listing, nothing downloaded
    assert f"{len(TSVS)} files, {size / 1e9:,.2f} GB" in out and "does not shrink the download" in out
    assert "2,400" in out  # the published count of the eight files (300 each, as this registry says)
    assert "scaled to 3" in out  # --limit 3: the estimate is the sample's per-question cost times 3


def test_data_pull_path_and_verify_from_the_command_line(hub, tmp_path, capsys, monkeypatch):
    commit = hub.add_commit(REPO, tdbench_files(), lfs=TSVS)
    monkeypatch.setenv("EVALKIT_REGISTRY", str(write_registry(tmp_path, tdbench_files())))
    from evalkit.cli import main

    assert main(["data", "pull", "tdbench", "--td-set", "main"]) == 0
    out = capsys.readouterr().out
    assert f"@ {commit}: 4 files, checked" in out and hub.downloads() == 4
    assert main(["data", "path", "tdbench"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert folder.name == commit and sorted(p.name for p in folder.iterdir()) == TSVS  # grounding pulled now
    assert main(["data", "verify", "tdbench"]) == 0
    assert "8 files verified" in capsys.readouterr().out
    blob = (folder / "tdbench_rot90.tsv").resolve()
    blob.write_bytes(blob.read_bytes().replace(b"\t", b" ", 1))  # a damaged copy in the cache
    assert main(["data", "verify", "tdbench"]) == 2
    err = capsys.readouterr().err
    assert "tdbench_rot90.tsv: sha256" in err and "1 file(s) differ" in err
