"""A run's records are written once: the final rewrite in query order reuses the lines append() made,
and is skipped when records.jsonl already holds exactly them in that order (issue 35 item 16); a
reply's reading is memoised (mcq.read_reply) without changing what a record says."""

from __future__ import annotations

from dataclasses import replace

from evalkit.benchmarks.mcq import MCQ, read_reply
from evalkit.core.record import Parsed, Record
from evalkit.core.types import Query
from evalkit.rundir.layout import RunDir, record_line


def rec(i: int, **kw) -> Record:
    return Record(query_id=f"q{i}", item_id=f"q{i}", base_id=f"q{i}", variant={}, model="m", request_key=f"k{i}",
                  response="Answer: A — ü", gold="A", parsed="A", parse_method="rule", correct=True, **kw)


def test_fresh_records_in_query_order_are_not_written_again(tmp_path):
    rundir = RunDir(tmp_path)
    rundir.load_records()
    records = [rec(i) for i in range(3)]
    for r in records:
        rundir.append(r)
    rundir.close()
    inode = rundir.records_path.stat().st_ino
    rundir.rewrite_records(records)
    assert rundir.records_path.stat().st_ino == inode  # not replaced: it already was the final file
    assert rundir.records_path.read_text(encoding="utf-8") == "".join(record_line(r) for r in records)


def test_other_order_or_replaced_records_are_rewritten(tmp_path):
    rundir = RunDir(tmp_path)
    rundir.load_records()
    records = [rec(i) for i in range(3)]
    for r in records:
        rundir.append(r)
    judged = replace(records[0], parsed="B", correct=False)  # a new record: its own line, not the appended one
    final = [records[2], judged, records[1]]
    rundir.rewrite_records(final)
    assert rundir.records_path.read_text(encoding="utf-8") == "".join(record_line(r) for r in final)
    assert '"parsed": "B"' in rundir.records_path.read_text(encoding="utf-8")


def test_a_file_that_held_lines_before_is_rewritten(tmp_path):
    rundir = RunDir(tmp_path)
    rundir.load_records()
    old = rec(0)
    rundir.append(old)
    rundir.close()
    rundir.load_records()  # a resume: the file holds one line already
    new = rec(1)
    rundir.append(new)
    inode = rundir.records_path.stat().st_ino
    rundir.rewrite_records([new])  # the old line is compacted away
    assert rundir.records_path.stat().st_ino != inode
    assert rundir.records_path.read_text(encoding="utf-8") == record_line(new)


def test_a_file_changed_behind_the_run_is_rewritten(tmp_path):
    rundir = RunDir(tmp_path)
    rundir.load_records()
    records = [rec(i) for i in range(2)]
    for r in records:
        rundir.append(r)
    rundir.close()
    with rundir.records_path.open("a", encoding="utf-8") as f:
        f.write("{}\n")
    rundir.rewrite_records(records)
    assert rundir.records_path.read_text(encoding="utf-8") == "".join(record_line(r) for r in records)


def test_read_reply_memo_gives_what_parsing_gives():
    bench = MCQ()
    options = {"A": "a cat", "B": "a dog", "C": "a tree"}
    query = Query(id="q", item_id="q", base_id="q", variant={}, messages=(), gold="B", options=options)
    for text, want in (("B", ("B", "rule", False)), ("The answer is (C).", ("C", "rule", False)),
                       ("a dog", ("B", "rule", False)), ("I cannot help with that.", (None, "refusal", True)),
                       ("", (None, "empty", False)), ("<think>A?</think>", (None, "empty", False)),
                       ("maybe", (None, "unparsed", False))):
        for _ in range(2):  # the second reading comes from the memo: an equal, separate Parsed
            parsed = bench.parse(query, text, "official")
            assert (parsed.answer, parsed.method, parsed.refusal) == want, text
            assert bench.parse(query, text, "robust") == parsed and bench.parse(query, text, "robust") is not parsed
    assert read_reply.cache_info().hits > 0
    other = Query(id="q2", item_id="q2", base_id="q2", variant={}, messages=(), gold="A",
                  options={"A": "a dog", "B": "a cat"})
    assert bench.parse(other, "a dog", "official").answer == "A"  # same reply, other options: read again
    long = "Let me think. " * 100 + "The answer is (B)."
    before = read_reply.cache_info().currsize
    assert bench.parse(query, long, "official") == Parsed("B", "rule")
    assert read_reply.cache_info().currsize == before  # a long reply is read, not kept
