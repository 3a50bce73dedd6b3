"""The run identity never drifts: golden identities, the data's content fingerprint, typed settings.

If a golden test here fails, a change would move users' default run directories (their runs
would stop resuming and `compare` would refuse old against new). Don't update the pins: leave
defaults out of the identity, or bump IDENTITY_VERSION and ship a migration.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from evalkit.benchmarks import benchmark_class, list_benchmarks
from evalkit.benchmarks.run_settings import resolve_settings
from evalkit.cli import main
from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.engine.evaluate import run
from evalkit.rundir.identity import FileHashes, data_fingerprint, legacy_identity, run_identity
from evalkit.rundir.layout import default_run_dir

DATA = "0" * 64  # a stand-in data fingerprint: these pins are about the settings


def _dir(bench: str, **options) -> str:
    s = resolve_settings(bench, "vllm/m", options)
    ident = run_identity(bench, s.options, s.config, "vllm/m", "http://h:8000/v1", DATA)
    return default_run_dir(bench, "vllm/m", ident).name


GOLDEN = [
    ("mcq", {}, "mcq-vllm_m-3a42a9f637"),
    ("mcq", {"circular": True}, "mcq-vllm_m-7c399719bc"),
    ("mcq", {"mode": "robust", "limit": 5}, "mcq-vllm_m-0b5f1cd815"),
    ("mcq", {"max_tokens": 256, "extra": {"guided_choice": ["A", "B"]}, "max_side": 1024}, "mcq-vllm_m-927b445ed6"),
    ("if-bench", {"lang": "en"}, "if-bench-vllm_m-ae384a7fe4"),
    ("tdbench", {"td_set": "main"}, "tdbench-vllm_m-d90e54fa5e"),
    ("rgb-th-bench", {"skills": "all"}, "rgb-th-bench-vllm_m-97e6e1146d"),
    ("mme-realworld", {"mme_lang": "en"}, "mme-realworld-vllm_m-fa0b611677"),
]


@pytest.mark.parametrize(("bench", "options", "expected"), GOLDEN)
def test_golden_identities(bench, options, expected):
    assert _dir(bench, **options) == expected


def test_identity_content():
    s = resolve_settings("mcq", "vllm/m", {"circular": True, "max_tokens": 256, "concurrency": 4,
                                          "judge": "vllm/j", "cache_dir": "/x", "out": "/y", "data": "/z.tsv"})
    ident = run_identity("mcq", s.options, s.config, "vllm/m", "http://h:8000/v1", DATA)
    assert ident == {"identity_version": 1, "benchmark": "mcq", "model": "vllm/m", "endpoint": "http://h:8000/v1",
                     "data_sha256": DATA, "circular": True, "max_tokens": 256}


def test_defaults_given_explicitly_do_not_move_the_identity():
    assert _dir("mcq") == _dir("mcq", mode="official", circular=False, rotations=1, group_images=True)
    assert _dir("tdbench") == _dir("tdbench", td_boot=200, td_any_category=False)


def test_operational_settings_never_enter_the_identity():
    base = _dir("if-bench")
    for opts in ({"concurrency": 3}, {"rpm": 10.0}, {"timeout": 5.0}, {"cache_dir": "c"}, {"no_cache": True},
                 {"judge": "vllm/j"}, {"out": "o"}, {"max_attempts": 2}, {"translated_images": "t"},
                 {"data": "elsewhere.json"}, {"images": "imgs"}, {"progress": False}):
        assert _dir("if-bench", **opts) == base, opts


def test_every_benchmark_identity_is_stable_and_distinct():
    dirs = {name: _dir(name) for name in list_benchmarks()}
    assert len(set(dirs.values())) == len(dirs)
    assert all(_dir(name) == d for name, d in dirs.items())


def test_legacy_identity_is_0_1_0s():
    """0.1.0's dict for `run mcq --circular` on a TSV (the hash the 0.1.0 fixtures were written under)."""
    ident = legacy_identity("mcq", {"circular": True, "concurrency": 4, "cache_dir": "cache"}, "vllm/m",
                            "http://h:8000/v1", Path("/data/mcq.tsv"))
    assert ident == {"benchmark": "mcq", "circular": True, "data": "/data/mcq.tsv", "endpoint": "http://h:8000/v1",
                     "mode": "official", "model": "vllm/m"}


# ---- the data's content ---------------------------------------------------------------------


def _copy_sample(dst: Path) -> Path:
    src = dataset_path("demo")
    shutil.copytree(src, dst)
    return dst / "mcq.jsonl"


def _fp(data: Path, memo: Path | None = None) -> str:
    s = resolve_settings("mcq", "vllm/m", {"data": str(data)})
    from evalkit.benchmarks.prepare import prepare

    items = prepare("mcq", s.bench_dict()).items
    hashes = FileHashes(memo)
    fp = data_fingerprint(data.resolve(), items, hashes)
    hashes.save()
    return fp


def test_fingerprint_follows_content_not_paths(tmp_path):
    a = _copy_sample(tmp_path / "a")
    b = _copy_sample(tmp_path / "moved" / "b")
    assert _fp(a) == _fp(b)  # a moved dataset is the same data
    lines = a.read_text().splitlines()
    row = json.loads(lines[0])
    row["question"] += " "
    a.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    assert _fp(a) != _fp(b)  # an edited question is not
    image = b.parent / json.loads(b.read_text().splitlines()[0])["image"]
    before = _fp(b)
    image.write_bytes(image.read_bytes() + b"\0")
    assert _fp(b) != before  # nor is a replaced image


def test_fingerprint_memo_sees_a_same_size_change_with_its_mtime_set_back(tmp_path):
    data = _copy_sample(tmp_path / "d")
    memo = tmp_path / "memo.json"
    first = _fp(data, memo)
    image = data.parent / json.loads(data.read_text().splitlines()[0])["image"]
    st = image.stat()
    raw = bytearray(image.read_bytes())
    raw[-1] ^= 0xFF  # same size; mtime restored: the change time (which that moved) tells
    image.write_bytes(bytes(raw))
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _fp(data, memo) != first


# ---- typed settings ---------------------------------------------------------------------------


def test_unknown_keyword_names_it_and_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EvalkitError, match=r"unknown option 'concurency'.*did you mean 'concurrency'"):
        run("mcq", "vllm/m", concurency=4)
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(("options", "message"), [
    ({"concurrency": "4"}, r"option 'concurrency' must be an integer"),
    ({"circular": "yes"}, r"option 'circular' must be true or false"),
    ({"mode": "lenient"}, r"option 'mode' must be one of official, robust"),
    ({"extra": "[1]"}, r"--extra must be a JSON object"),
    ({"rotations": 3}, r"option 'rotations' must be one of 1, 2, 4"),
])
def test_wrong_types_name_the_option(options, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EvalkitError, match=message):
        run("mcq", "vllm/m", **options)
    assert list(tmp_path.iterdir()) == []


def test_another_benchmarks_option_names_its_benchmark(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EvalkitError, match=r"'circular' \(--circular\) belongs to benchmark mcq, not if-bench"):
        run("if-bench", "vllm/m", circular=True)
    assert main(["run", "if-bench", "--model", "vllm/m", "--circular"]) == 2
    assert "--circular is an option of benchmark mcq, not of if-bench" in capsys.readouterr().err


def test_flag_names_are_unique_across_benchmarks():
    from dataclasses import fields

    from evalkit.core.settings import RunConfig

    seen = {f.name: "run" for f in fields(RunConfig)}
    for name in list_benchmarks():
        for f in fields(benchmark_class(name).Options):
            assert f.name not in seen, f"{name}: option '{f.name}' is also {seen[f.name]}'s"
            seen[f.name] = name
