"""MME-RealWorld metrics: Avg / Avg-C per task and domain, E-rates and wrong choices (pure functions).

The two answer parsers (official, quirks included, and robust) live with the benchmark
(evalkit/benchmarks/mmerealworld.py), which also re-runs both on the raw responses for `modes`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.core.record import Record

LETTERS = "ABCDE"
TASKS = ("Perception", "Reasoning")
DOMAINS = ("OCR", "RS", "DT", "MO", "AD")  # the paper's column order

# Subtask spellings (English file, VLMEvalKit category, Chinese file) -> the paper's domain codes.
_DOMAIN_WORDS = (
    ("OCR", ("ocr", "文字", "字符")),
    ("RS", ("remote", "遥感")),
    ("DT", ("diagram", "table", "图表")),
    ("MO", ("monitor", "监控")),
    ("AD", ("autonomous", "driving", "自动驾驶")),
)


# ---------------------------------------------------------------------------------------
# Grouping
# ---------------------------------------------------------------------------------------


def domain_code(subtask: str) -> str:
    """The paper's domain code (OCR, RS, DT, MO, AD) for a Subtask; unknown names pass through."""
    low = subtask.strip().lower().replace("_", " ")
    for code, words in _DOMAIN_WORDS:
        if low == code.lower() or any(w in low for w in words):
            return code
    return subtask.strip()


def task_name(task: str) -> str:
    """"perception" / "Perception" / "感知" -> "Perception" (likewise Reasoning)."""
    low = task.strip().lower()
    if low.startswith("percep") or "感知" in low:
        return "Perception"
    if low.startswith("reason") or "推理" in low:
        return "Reasoning"
    return task.strip()


def category_group(category: str) -> str:
    """The official scoring group: lower-cased, every "...attribute..." merged into "<first part>/attribute"."""
    low = category.strip().lower()
    if "attribute" in low:
        return low.split("/")[0] + "/attribute"
    return low


def scoring_key(task: str, subtask: str, category: str) -> str:
    """"Task/DOMAIN/group", the category string a query carries (split with split('/', 2))."""
    return f"{task_name(task)}/{domain_code(subtask)}/{category_group(category)}"


def split_key(key: str) -> tuple[str, str, str]:
    parts = key.split("/", 2)
    while len(parts) < 3:
        parts.append("")
    return parts[0], parts[1], parts[2]


# ---------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MMERealWorldScored:
    """One answered (or failed) query as the metrics see it."""

    task: str
    domain: str
    group: str
    gold: str
    answer: str | None  # None: no answer (unparsed, refusal, request error)
    correct: bool


def scored_from_records(records: Iterable[Record]) -> list[MMERealWorldScored]:
    out = []
    for r in records:
        task, domain, group = split_key(r.category)
        out.append(MMERealWorldScored(task, domain, group, r.gold, r.parsed if r.error is None else None, r.correct is True))
    return out


def _pct(k: int, n: int) -> float:
    return 100.0 * k / n if n else 0.0


def _acc(rows: Sequence[MMERealWorldScored]) -> float:
    return _pct(sum(1 for s in rows if s.correct), len(rows))


def _order(values: Iterable[str], preferred: Sequence[str]) -> list[str]:
    vals = set(values)
    return [v for v in preferred if v in vals] + sorted(vals - set(preferred))


def accuracy_tables(rows: Sequence[MMERealWorldScored]) -> dict[str, Any]:
    """Per task (its domains, Avg item-weighted, Avg-C unweighted over domains), overall, per category.

    Shaped like the paper's tables: metrics["Perception"] = {"OCR": .., ..., "Avg": .., "Avg-C": .., "n": ..}.
    Overall Avg-C is the unweighted mean over every (task, domain) cell.
    """
    by_task: dict[str, list[MMERealWorldScored]] = defaultdict(list)
    for s in rows:
        by_task[s.task].append(s)
    out: dict[str, Any] = {"Avg": _acc(rows), "Avg-C": 0.0, "n": len(rows)}
    cells: list[float] = []
    n_by_domain: dict[str, int] = {}
    for task in _order(by_task, TASKS):
        trs = by_task[task]
        by_domain: dict[str, list[MMERealWorldScored]] = defaultdict(list)
        for s in trs:
            by_domain[s.domain].append(s)
        domains = {d: _acc(by_domain[d]) for d in _order(by_domain, DOMAINS)}
        cells.extend(domains.values())
        n_by_domain.update({f"{task}/{d}": len(by_domain[d]) for d in domains})
        out[task] = {**domains, "Avg": _acc(trs), "Avg-C": sum(domains.values()) / len(domains), "n": len(trs)}
    out["Avg-C"] = sum(cells) / len(cells) if cells else 0.0
    groups: dict[str, list[MMERealWorldScored]] = defaultdict(list)
    for s in rows:
        groups[f"{s.task}/{s.domain}/{s.group}"].append(s)
    out["per_category"] = {k: _acc(v) for k, v in sorted(groups.items())}
    out["details"] = {"n_by_domain": n_by_domain, "n_by_category": {k: len(v) for k, v in sorted(groups.items())}}
    return out


def e_rates(rows: Sequence[MMERealWorldScored]) -> dict[str, Any]:
    """How often the model answers E against how often E is right (paper Fig. 3), overall and per domain."""
    def one(rs: Sequence[MMERealWorldScored]) -> dict[str, Any]:
        answered = sum(1 for s in rs if s.answer == "E")
        gold = sum(1 for s in rs if s.gold == "E")
        return {"n": len(rs), "answered_E": answered, "gold_E": gold,
                "answered_E_rate": _pct(answered, len(rs)), "gold_E_rate": _pct(gold, len(rs))}

    cells: dict[str, list[MMERealWorldScored]] = defaultdict(list)
    for s in rows:
        cells[f"{s.domain} ({s.task[:1]})"].append(s)
    return {**one(rows), "by_domain": {k: one(v) for k, v in sorted(cells.items())}}


def wrong_choices(rows: Sequence[MMERealWorldScored]) -> dict[str, Any]:
    """Gold letter -> wrongly chosen letter -> count (paper Fig. 4; the diagonal is 0 by construction),
    and, apart, the wrong answers that named no letter."""
    letters = sorted({*LETTERS, *(s.gold for s in rows), *(s.answer for s in rows if s.answer)})
    matrix = {g: dict.fromkeys(letters, 0) for g in letters}
    no_answer = dict.fromkeys(letters, 0)
    for s in rows:
        if s.correct:
            continue
        if s.answer is None:
            no_answer[s.gold] = no_answer.get(s.gold, 0) + 1
        elif s.answer != s.gold:
            matrix[s.gold][s.answer] += 1
    return {"matrix": matrix, "no_answer": no_answer}


def mme_metrics(records: Sequence[Record], modes: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the summary reports for MME-RealWorld, from graded records. `modes` is the
    benchmark's comparison of its two parsers on the raw responses (parsing is the benchmark's)."""
    rows = scored_from_records(records)
    out = accuracy_tables(rows)
    rates = e_rates(rows)
    wrong = wrong_choices(rows)
    picked = {x: sum(row[x] for row in wrong["matrix"].values()) for x in wrong["matrix"]}
    out["details"].update(e_rate_by_domain=rates.pop("by_domain"), wrong_choices=wrong)
    # flat tables first (the console and report.md show one level), the nested details last
    details = out.pop("details")
    return {**out, "e_rate": rates, "wrong_answers_by_letter": {**picked, "none": sum(wrong["no_answer"].values())},
            "modes": modes, "details": details}
