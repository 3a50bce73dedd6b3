"""POPE: Polling-based Object Probing Evaluation (Li et al., "Evaluating Object Hallucination in
Large Vision-Language Models", EMNLP 2023, arXiv:2305.10355).

Every question asks whether one object is in the image ("Is there a <object> in the image?");
half the objects are there (gold "yes"), half are not, and the absent ones are sampled three
ways, the three splits: random, popular (the dataset's most frequent objects) and adversarial
(objects that co-occur most with the ones present). The metrics take "yes" as the positive
class: accuracy, precision, recall, F1 and the yes-ratio (share of questions answered yes, the
tell-tale of a model that hallucinates by agreeing), overall and per split.

Data: JSONL, one object per line, in the official form (`question_id`, `image`, `text`, `label`)
or with `id`, `question`, `answer`; an optional `category` names the split. The official files
(`coco_pope_random.json`, ...) have no category: a file whose name ends in `_random`, `_popular`
or `_adversarial` gives it. `--data` may also be a folder of such files (ids are then prefixed
with the file's name, since every official split numbers its questions from 0). Image paths are
relative to the data file's folder, or to `--images`.

Parsing: `--mode official` is the POPE repository's evaluate.py rule; `--mode robust` reads
whole-word yes/no answers and leaves anything else unparsed (for the LLM extractor).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.benchmarks.base import Benchmark, JudgeRequest
from evalkit.benchmarks.lenient import STRICT, LenientLoad, Sink
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Parsed, Record
from evalkit.core.report_table import ReportTable
from evalkit.core.resources import fill_template, read_prompt
from evalkit.core.settings import option
from evalkit.core.text import data_json
from evalkit.core.types import ImageRef, Item, Query
from evalkit.grading.extract import is_refusal, judge_prompt_yesno, parse_yes_no, strip_reasoning
from evalkit.images.files import not_a_file

SPLITS = ("random", "popular", "adversarial")  # the paper's order, used to order per-split tables
ALL_ROW = "all"  # the pooled row of the per-split table
DATA_SUFFIXES = (".jsonl", ".json")

# ---------------------------------------------------------------------------------------
# Parsing (pure)
# ---------------------------------------------------------------------------------------


def parse_official(text: str | None) -> str:
    """POPE's evaluate.py, exactly: keep the text before the first ".", drop commas, split on
    spaces; "No", "no" or "not" among the words is No, anything else (an empty reply, "NO",
    "Not really", a refusal) is Yes. Case-sensitive and space-split, as the script is."""
    text = text or ""
    if "." in text:
        text = text.split(".")[0]
    words = text.replace(",", "").split(" ")
    return "No" if ("No" in words or "not" in words or "no" in words) else "Yes"


def parse_robust(text: str | None) -> Parsed:
    """Reasoning removed, then evalkit's whole-word yes/no reader: a refusal, an empty reply or a
    reply committing to neither (or both) stays unparsed, never guessed."""
    cleaned = strip_reasoning(text)
    if not cleaned:
        return Parsed(None, "empty")
    if is_refusal(cleaned):
        return Parsed(None, "refusal", refusal=True)
    answer = parse_yes_no(cleaned)
    return Parsed(answer, "rule") if answer else Parsed(None, "unparsed")


# ---------------------------------------------------------------------------------------
# Metrics (pure)
# ---------------------------------------------------------------------------------------


def _pct(num: int, den: int) -> float:
    """100 * num / den, 0.0 for an empty denominator (scikit-learn's zero_division=0)."""
    return 100.0 * num / den if den else 0.0


def binary_metrics(records: Sequence[Record]) -> dict[str, Any]:
    """POPE's numbers over `records`, "yes" the positive class, all in percent.

    TP/FP/TN/FN count answered questions (parsed Yes or No). A question with no answer (a
    failed request, a refusal, an unparsed reply) is wrong in accuracy and never a "yes": on a
    yes question it is a miss (it lowers recall), on a no question it is no false alarm.
    With every question answered (always so in official mode) these are the script's formulas:

    - accuracy  = (TP + TN) / N
    - precision = TP / (TP + FP)
    - recall    = TP / (TP + FN + unanswered yes questions)
    - F1        = 2 TP / (2 TP + FP + FN + unanswered yes questions)  (= 2PR / (P + R))
    - yes_ratio = (TP + FP) / N
    """
    tp = fp = tn = fn = unanswered_yes = unanswered = 0
    for r in records:
        gold_yes = r.gold == "Yes"
        if r.error is None and r.parsed == "Yes":
            tp += gold_yes
            fp += not gold_yes
        elif r.error is None and r.parsed == "No":
            fn += gold_yes
            tn += not gold_yes
        else:
            unanswered += 1
            unanswered_yes += gold_yes
    n = len(records)
    return {
        "accuracy": _pct(tp + tn, n),
        "precision": _pct(tp, tp + fp),
        "recall": _pct(tp, tp + fn + unanswered_yes),
        "F1": _pct(2 * tp, 2 * tp + fp + fn + unanswered_yes),
        "yes_ratio": _pct(tp + fp, n),
        "n": n,
        "confusion": {"TP": tp, "FP": fp, "TN": tn, "FN": fn, "unanswered": unanswered},
    }


def _split_order(name: str) -> tuple[int, str]:
    return (SPLITS.index(name) if name in SPLITS else len(SPLITS), name)


def pope_metrics(records: Sequence[Record]) -> dict[str, Any]:
    """Overall numbers (all questions pooled), then the same per split under the split's name
    (`metrics["adversarial"]["F1"]`, shown as "adversarial / F1"), in the paper's order. A split
    named like an overall key ("n") is stored as "split n"."""
    out = binary_metrics(records)
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.category or "(none)", []).append(r)
    if any(r.category for r in records):
        for name in sorted(groups, key=_split_order):
            split = binary_metrics(groups[name])
            split.pop("confusion")
            out[name if name not in out else f"split {name}"] = split
    return out


PAPER_HEAD = ("split", "Accuracy", "Precision", "Recall", "F1 Score", "Yes (%)", "n")
PAPER_KEYS = ("accuracy", "precision", "recall", "F1", "yes_ratio", "n")


def pope_table(metrics: dict[str, Any]) -> ReportTable:
    """The paper's results table (arXiv 2305.10355: a row per POPE setting with Accuracy, Precision,
    Recall, F1 Score and Yes), a row per split in the paper's order, then every question pooled
    ("all") when there is more than one split or none."""
    splits = [(name, v) for name, v in metrics.items() if isinstance(v, dict) and "accuracy" in v]
    rows = [[name.removeprefix("split "), *(v.get(k) for k in PAPER_KEYS)] for name, v in splits]
    pooled = len(rows) != 1  # one split: its row is the pooled one
    if pooled:
        rows.append([ALL_ROW, *(metrics.get(k) for k in PAPER_KEYS)])
    note = ('"yes" is the positive class; Yes: the share of questions answered yes; a question without an answer '
            "is wrong and never a yes" + ("; all: every question pooled" if pooled else ""))
    return ReportTable("POPE: accuracy, precision, recall, F1 and yes-ratio per split (%)", PAPER_HEAD, rows,
                       note=note, console=True, groups=[ALL_ROW] if pooled and splits else [])


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def _split_from_name(path: Path) -> str:
    stem = path.stem.lower()
    return next((s for s in SPLITS if stem.endswith("_" + s) or stem == s), "")


def _field(row: dict[str, Any], names: tuple[str, ...], where: str) -> Any:
    for name in names:
        value = row.get(name)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    raise EvalkitError(f"{where}: missing field '{names[0]}'" + (f" (or '{names[1]}')" if len(names) > 1 else ""))


def load_file(path: Path, images: Path | None, *, prefix: str = "", sink: Sink = STRICT) -> list[Item]:
    """Items of one JSONL file; any bad row is an EvalkitError naming the file and line (lenient,
    `sink`: a problem, and the next line is read; a label or an image file lint names is kept)."""
    base = images if images is not None else path.parent
    file_split = _split_from_name(path)
    items: list[Item] = []
    first_line: dict[str, int] = {}
    for lineno, line in read_caps.data_lines(path):  # line by line, under the cap
        if line is not None and not line.strip():
            continue
        where = f"{path}:{lineno}"
        with sink.guard(path, row=f"line {lineno}"):
            if line is None:
                raise EvalkitError(f"{where}: the line is {read_caps.over_line_cap()}")
            try:
                row = data_json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvalkitError(f"{where}: invalid JSON ({data_json.at_column(exc)})") from exc
            if not isinstance(row, dict):
                raise EvalkitError(f"{where}: expected a JSON object, got {type(row).__name__}")
            raw_id = _field(row, ("question_id", "id"), where)
            if isinstance(raw_id, (bool, dict, list, float)):
                raise EvalkitError(f"{where}: question_id {raw_id!r} is not a string or an integer")
            qid = prefix + str(raw_id).strip()
            if qid in first_line:
                sink.add(f"{where}: duplicate id '{qid}' (first on line {first_line[qid]})", path,
                         row=f"line {lineno}", items=(qid,), kind="duplicate-id")
                continue
            first_line[qid] = lineno
            image = _field(row, ("image",), where)
            question = _field(row, ("text", "question"), where)
            label = _field(row, ("label", "answer"), where)
            if not isinstance(image, str) or not isinstance(question, str):
                raise EvalkitError(f"{where}: 'image' and 'text' must be strings")
            gold = label.strip().lower() if isinstance(label, str) else ""
            if gold not in ("yes", "no"):
                sink.content(f"{where}: label {label!r} is not yes or no")  # lenient: kept for lint's check
                gold = str(label).strip()
            category = row.get("category")
            if category is not None and not isinstance(category, str):
                raise EvalkitError(f"{where}: category {category!r} is not a string")
            full = Path(image) if Path(image).is_absolute() else base / image
            problem = not_a_file(full)  # missing, a named pipe, a folder, a symlink loop
            if problem is not None:
                sink.content(f"{where}: {problem}: {full}")  # lenient: kept, lint names it
            items.append(Item(id=qid, question=question.strip(), options={}, answer=gold.capitalize(),
                              images=(ImageRef.from_path(str(full)),), category=(category or file_split).strip(),
                              meta={"image": image, "line": lineno,
                                    **({"source": str(path)} if sink.lenient else {})}))
    if not items:
        raise EvalkitError(f"{path}: no questions")
    return items


def load_pope(data: Path, images: Path | None = None, split: str | None = None, sink: Sink = STRICT) -> list[Item]:
    """Items of a file, or of every .jsonl/.json file in a folder (ids prefixed by file name);
    `split` keeps one category and must match some question."""
    if data.is_dir():
        files = sorted(p for p in data.iterdir() if p.is_file() and p.suffix.lower() in DATA_SUFFIXES)
        if not files:
            raise EvalkitError(f"{data}: no .jsonl or .json file in the folder")
        many = len(files) > 1
        items = []
        for f in files:
            with sink.guard(f, kind="unreadable-file"):
                items += load_file(f, images, prefix=f"{f.stem}/" if many else "", sink=sink)
    elif data.is_file():
        items = load_file(data, images, sink=sink)
    else:
        raise EvalkitError(f"{data}: not found")
    if split:
        kept = [it for it in items if it.category == split]
        if not kept:
            present = sorted({it.category or "(none)" for it in items}, key=_split_order)
            raise EvalkitError(f"--pope-split {split}: no question of that split in {data} "
                               f"(splits present: {', '.join(present)})")
        items = kept
    return items


# ---------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------


class POPE(Benchmark):
    """POPE: accuracy, precision, recall, F1 and yes-ratio, overall and per split.

    The headline is accuracy, not F1, although POPE's tables lead with both. A headline must be a
    ScoreTable whose estimate is the reported number, and F1 = 2TP / (2TP + FP + FN) is a ratio
    whose denominator depends on the model's answers: as a mean of observations it needs two
    observations per true positive and none per true negative, so two models would have
    different observation sets and the paired tests of `evalkit compare` (which pair
    observations by key and keep the common ones) would compare F1 on subsets, not the runs' F1.
    Accuracy is one right/wrong observation per question, exact for intervals, McNemar and the
    paired bootstrap alike. F1, precision, recall and yes-ratio are all reported next to it.
    """

    name = "pope"
    default_data = "pope/pope_sample.jsonl"
    headline_metric = "accuracy"

    @dataclass(frozen=True)
    class Options:
        pope_split: str | None = option(
            help="pope: only the questions of this split (category): random, popular or adversarial",
            metavar="SPLIT")

    def load(self, data: Path, images: Path | None, options: dict[str, Any]) -> list[Item]:
        return load_pope(Path(data), images, options.get("pope_split"))

    def load_lenient(self, data: Path, images: Path | None, options: dict[str, Any]) -> LenientLoad:
        sink = Sink(lenient=True)
        items: list[Item] = []
        with sink.guard(data, kind="unreadable-file"):
            items = load_pope(Path(data), images, options.get("pope_split"), sink)
        return LenientLoad(items, sink.problems)

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        template = read_prompt("pope", "default.txt")
        for item in items:
            yield self.make_query(item, options, fill_template(template, question=item.question))

    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        if mode == "robust":
            return parse_robust(text)
        refusal = is_refusal(text)
        return Parsed(parse_official(text), "official" if (text or "").strip() else "official_empty",
                      refusal=refusal)

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None:
        question = str(query.meta.get("question") or query.prompt_text())
        return JudgeRequest(prompt=judge_prompt_yesno(question, strip_reasoning(text)), valid=("Yes", "No"))

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        return pope_metrics(records)

    def tables(self, metrics: dict[str, Any], label: str, options: dict[str, Any]) -> list[ReportTable]:
        return [pope_table(metrics)]

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(k, metrics[k]) for k in ("accuracy", "F1", "precision", "recall", "yes_ratio", "n") if k in metrics]
