"""The data findings each question carries: the run's lint (lint.json) and its benchmark's own (summary.json).

A finding names the item ids it is about; the page shows it on those questions' rows and on the
question itself, so a reader of a wrong answer sees that its gold is not among the options, say,
instead of blaming the model. Runs of one data set report the same findings: they are listed once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalkit.core.findings import SEVERITIES
from evalkit.lint.runs import read_lint
from evalkit.view.runs import ViewRun


@dataclass
class QuestionFindings:
    """The distinct findings (severity, kind, message, where) and, per question id, the indices of its own."""

    findings: list[list[str]] = field(default_factory=list)
    by_question: dict[str, list[int]] = field(default_factory=dict)


def question_findings(runs: Sequence[ViewRun], question_ids: Sequence[str]) -> QuestionFindings:
    """The findings of every run that name at least one of these questions, most severe first."""
    known = set(question_ids)
    seen: dict[tuple[str, str, str], int] = {}
    found: list[tuple[list[str], list[str]]] = []
    for run in runs:
        for f in _raw(run):
            items = [i for i in f.get("items") or () if isinstance(i, str) and i in known]
            severity, kind, message = (str(f.get(k) or "") for k in ("severity", "kind", "message"))
            if not items or not kind:
                continue
            key = (severity, kind, message)
            if key in seen:
                found[seen[key]][1].extend(items)
                continue
            seen[key] = len(found)
            where = ", ".join(str(f[k]) for k in ("file", "where") if f.get(k))
            found.append(([severity, kind, message, where], items))
    found.sort(key=lambda x: SEVERITIES.index(x[0][0]) if x[0][0] in SEVERITIES else len(SEVERITIES))
    out = QuestionFindings([f for f, _ in found])
    for k, (_, items) in enumerate(found):
        for qid in dict.fromkeys(items):
            out.by_question.setdefault(qid, []).append(k)
    return out


def _raw(run: ViewRun) -> list[dict[str, Any]]:
    """lint.json's findings (absent before lint existed), then the summary's data findings."""
    lint = read_lint(run.path) or {}
    listed = [*(lint.get("findings") or []), *(run.summary.get("findings") or [])]
    return [f for f in listed if isinstance(f, dict)]
