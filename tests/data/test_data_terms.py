"""The licence and terms of each registered source, and the Lite TSV's published size and sha256, as
`evalkit data list` and docs/data.md give them; a download whose bytes are not the published sha256
is refused."""

from __future__ import annotations

import hashlib

from cli_under_test import checkout_under_test, run_cli

from evalkit.core.resources import dataset_path

LITE_SIZE = "1,990,690,823"
LITE_SHA = "d66abee0758232d75d1586c27a39a19059d7e9bb4c855d3ecceab283a7488065"


def terms_of(listing: str) -> dict[str, str]:
    """source name -> the terms `data list` gives it (one line may name several sources)."""
    block = listing.split("licences and terms", 1)[1].splitlines()[1:]
    out: dict[str, str] = {}
    for line in block:
        names, _, text = line.strip().partition(": ")
        for name in names.split(", "):
            out[name] = text
    return out


def test_data_list_gives_each_sources_terms_and_the_lite_files_published_checksum(tmp_path):
    done = run_cli(["data", "list"], cwd=tmp_path, env={"EVALKIT_DATA_CACHE": str(tmp_path / "d"),
                                                        "HF_HUB_CACHE": str(tmp_path / "hf")})
    assert done.returncode == 0, done.stderr
    assert "licences and terms" in done.stdout, done.stdout  # 0.3.0: no terms at all
    terms = terms_of(done.stdout)
    names = ["tdbench", "mme-realworld-lite", "mme-realworld-base64", "mme-realworld-base64-cn",
             "mme-realworld-official", "if-bench", "if-bench-images", "if-bench-genvip", "rgb-th-bench"]
    assert sorted(terms) == sorted(names)
    mme = terms["mme-realworld-lite"]  # both statements, each with where it was read
    assert "academic research only" in mme and "github.com/yfzhang114/MME-RealWorld" in mme
    assert "apache-2.0" in mme and "huggingface.co/datasets/yifanzhang114/MME-RealWorld" in mme
    assert all(terms[n] == mme for n in names if n.startswith("mme-realworld"))
    assert "no licence file" in terms["rgb-th-bench"] and "huhanwj/RGB-Th-Benchmark" in terms["rgb-th-bench"]
    assert "23 infrared datasets" in terms["if-bench-images"] and "23 infrared datasets" in terms["if-bench-genvip"]
    assert all("2026-11-29" in terms[n] for n in names if n not in ("tdbench", "if-bench"))
    assert f"mme_realworld_lite.tsv: {LITE_SIZE} bytes, sha256 {LITE_SHA}" in done.stdout


def test_docs_data_md_gives_the_same_terms():
    text = (checkout_under_test() / "docs" / "data.md").read_text(encoding="utf-8")
    assert "## Licences and terms" in text
    section = text.split("## Licences and terms", 1)[1].split("\n## ", 1)[0]
    for fact in ("academic research only", "apache-2.0", "no licence file", "23 infrared datasets",
                 "1,990,690,823 bytes", LITE_SHA, "2026-11-29"):
        assert fact in section, fact


def test_a_download_that_is_not_the_published_sha256_is_refused_and_not_kept(hub, tmp_path):
    tsv = dataset_path("tdbench", "tdbench_rot0.tsv").read_bytes()
    hub.add_commit("me/lite", {"lite.tsv": tsv}, lfs=["lite.tsv"])
    published = hashlib.sha256(b"the bytes the publisher states").hexdigest()
    (tmp_path / "registry.toml").write_text(f'''[[source]]
bench = "mme-realworld"
name = "mme-realworld-lite"
kind = "hub"
repo = "me/lite"
revision = "main"
read = "2026-11-29"
layout = "test"
checksums = "hub"
[[source.files]]
path = "lite.tsv"
size = {len(tsv)}
sha256 = "{published}"
when = {{ mme_set = ["lite"] }}
''')
    env = {"EVALKIT_REGISTRY": str(tmp_path / "registry.toml")}
    done = run_cli(["data", "pull", "mme-realworld", "--mme-set", "lite"], cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stdout  # 0.3.0: the published sha256 is not read; "1 files, checked"
    line = done.stderr.strip().splitlines()[-1]
    assert f"sha256 {hashlib.sha256(tsv).hexdigest()} is not the published {published}" in line
    assert not list((tmp_path / "hf").rglob("snapshots/*/lite.tsv"))  # not kept as if checked
