"""Run directories built from fixed per-question outcomes, for compare and report tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.benchmarks import get_benchmark
from evalkit.core.record import Record
from evalkit.grading.grade import summarize
from evalkit.metrics.analysis.result import analyze
from evalkit.report.markdown import write_report
from evalkit.rundir.layout import RunDir

LETTERS = "ABCDE"


def record(qid: str, correct: bool, *, gold: str = "A", base: str | None = None, variant: dict | None = None,
           category: str = "", model: str = "m", wrong: str | None = None) -> Record:
    """One graded answer: right, or the letter `wrong` (default: the next letter after gold)."""
    chosen = gold if correct else (wrong or LETTERS[(LETTERS.index(gold) + 1) % 4])
    return Record(query_id=qid, item_id=base or qid, base_id=base or qid, variant=variant or {}, model=model,
                  request_key="k" + qid, response=f"Answer: {chosen}", gold=gold, parsed=chosen,
                  parse_method="rule", correct=correct, category=category,
                  usage={"input_tokens": 100, "output_tokens": 2})


def make_run(path: Path, model: str, records: Sequence[Record], *, plots: bool = False, **identity: Any) -> Path:
    """config.json, records.jsonl, summary.json and report.md as `evalkit run` leaves them."""
    ident = {"benchmark": "mcq", "data": "/data/set.tsv", "endpoint": "http://127.0.0.1:1", "mode": "official",
             "model": model, **identity}
    bench = get_benchmark(ident["benchmark"])
    rundir = RunDir(path)
    rundir.bind(ident, dict(ident))
    rundir.rewrite_records(records)
    options = {**ident}
    n_items = len({r.base_id for r in records})
    summary = summarize(bench, records, model=model, mode=ident["mode"], n_items=n_items, n_queries=len(records),
                        options=options, config=dict(ident), judge=None)
    analysis = analyze(model, bench, records, options, n_boot=200) if plots else None
    summary["headline"] = analysis.headline_dict() if analysis else None
    rundir.write_summary(summary)
    write_report(rundir.path, summary, analysis)
    return rundir.path
