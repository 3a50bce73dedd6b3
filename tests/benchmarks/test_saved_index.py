"""The saved index in-process (benchmarks/readers/saved_index.py): the rows and records it gives back
are the ones the streaming readers read (quoted TSV cells, CRLF, a BOM, escaped JSON, a record without
an image); bytes other than a registered source's recorded sha256 are never indexed; a read left
early or made by a dry run writes none; the file hashed as it is read is the file's sha256."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evalkit.benchmarks.readers.saved_index import Indexing, index_files, indexing
from evalkit.benchmarks.readers.stream_json import json_records
from evalkit.benchmarks.readers.stream_tsv import tsv_rows

B64 = "iVBORw0KGgo" * 40  # long enough to stay in the file as a span


def tsv_file(path: Path) -> Path:
    rows = ["index\timage\tquestion\tanswer\r\n", f"1\t{B64}\t\"a \"\"quoted\"\"\ttab\"\tA\r\n", "\r\n",
            f"2\t{B64[:-4]}\tplain\tB\textra cell\r\n", "3\t1\tshort image cell\tC\r\n"]
    path.write_bytes(b"\xef\xbb\xbf" + "".join(rows).encode())
    return path


def json_file(path: Path) -> Path:
    recs = [{"index": 1, "image": B64, "question": "q/1", "options": ["(A) x", "(B) y"]},
            {"index": 2, "question": "no image", "nested": {"image": "not this one"}},
            {"index": 3, "image": B64[:-8], "question": "q3", "n": 1.5e300}]
    path.write_text(json.dumps(recs, indent=2).replace("/", "\\/"), encoding="utf-8")
    return path


def read_tsv(path: Path) -> tuple[list[str], list]:
    header, rows = tsv_rows(path)
    return header, list(rows)


def test_rows_and_records_from_the_index_are_the_ones_read(tmp_path):
    tsv, js = tsv_file(tmp_path / "d.tsv"), json_file(tmp_path / "d.json")
    plain = (read_tsv(tsv), list(json_records(js)))
    ix = Indexing(tmp_path / "index")
    with indexing(ix):
        built = (read_tsv(tsv), list(json_records(js)))
    assert sorted(ix.built) == sorted([str(tsv), str(js)]) and ix.used == []
    assert len(index_files(tmp_path / "index")) == 2
    again = Indexing(tmp_path / "index")
    with indexing(again):
        saved = (read_tsv(tsv), list(json_records(js)))
    assert sorted(again.used) == sorted([str(tsv), str(js)]) and again.built == [] and again.notes == []
    assert plain == built == saved
    assert plain[0][1][0].cells["question"] == 'a "quoted"\ttab' and plain[1][1].image is None
    for path in (tsv, js):
        assert again.hashes[str(path)][2] == ix.hashes[str(path)][2] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_bytes_other_than_the_recorded_sha256_are_never_indexed(tmp_path):
    js = json_file(tmp_path / "d.json")
    sha = hashlib.sha256(js.read_bytes()).hexdigest()
    wrong = Indexing(None, {str(js.resolve()): ("0" * 64, tmp_path / "hub-index")})
    with indexing(wrong):
        first = list(json_records(js))
    assert index_files(tmp_path / "hub-index") == []
    assert wrong.notes == [f"{js}: its sha256 {sha} is not the {'0' * 64} its source records; not indexed "
                           "(`evalkit data verify` checks the cached files)"]
    for n in range(2):
        ix = Indexing(None, {str(js.resolve()): (sha, tmp_path / "hub-index")})
        with indexing(ix):
            assert list(json_records(js)) == first
        assert (ix.built, ix.used, ix.notes) == (([str(js)], [], []) if n == 0 else ([], [str(js)], []))
    assert len(index_files(tmp_path / "hub-index")) == 1


def test_a_read_left_early_or_a_dry_run_writes_no_index(tmp_path):
    js = json_file(tmp_path / "d.json")
    ix = Indexing(tmp_path / "index")
    with indexing(ix):
        next(iter(json_records(js)))  # the first record only (is_base64_part's look)
    assert index_files(tmp_path / "index") == [] and ix.built == []
    dry = Indexing(tmp_path / "index", write=False)
    with indexing(dry):
        list(json_records(js))
    assert index_files(tmp_path / "index") == [] and dry.built == [str(js)] and str(js) in dry.hashes
