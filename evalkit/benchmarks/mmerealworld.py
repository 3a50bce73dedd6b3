"""MME-RealWorld: high-resolution 5-option MCQ, from the official JSON, the VLMEvalKit TSV or the
base64 JSON parts (reading them and choosing a folder's files: evalkit/benchmarks/readers/mmerealworld.py).
Every form becomes the same Items, prompts and scoring keys, so the forms give identical metrics.

The two answer parsers are here; the metrics live in evalkit/metrics/mmerealworld.py (pure functions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.benchmarks.base import Benchmark, JudgeRequest, accuracy_table
from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.benchmarks.readers.mmerealworld import detect_lang, load_files, option_text, selected_data_files
from evalkit.benchmarks.readers.mmerealworld import (
    load_json as load_json,  # re-exported: the readers' old home
)
from evalkit.benchmarks.readers.mmerealworld import load_vlmeval_tsv as load_vlmeval_tsv
from evalkit.core.record import Parsed, Record
from evalkit.core.report_table import ReportTable
from evalkit.core.resources import fill_template, read_prompt
from evalkit.core.settings import option
from evalkit.core.types import GenParams, ImagePart, Item, Message, Query, Transform
from evalkit.grading.extract import is_refusal, judge_prompt_mcq, parse_letter, strip_reasoning
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.mmerealworld import LETTERS, mme_metrics

# The official prefix list, as it behaves: two missing commas glue four entries into two strings
# that never occur in an answer, so "Best answer:" etc. are in effect never removed.
OFFICIAL_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",
    "Best answer:Best option:",
)
_UPPER_ABCDE = re.compile(r"[ABCDE]")


def parse_official(response: str | None, choices: Sequence[tuple[str, str]]) -> str | None:
    """The five official steps; `choices` are (letter, "(X) text") pairs as shown in the prompt.

    "" -> A (the empty string is inside every option), "Based on ... C" -> B (first capital
    A-E anywhere), "Answer: E" -> A, "Best answer: D" -> B. None means no answer.
    """
    s = (response or "").strip()
    for prefix in OFFICIAL_PREFIXES:
        s = s.replace(prefix, "")
    if len(s.split()) > 10 and not _UPPER_ABCDE.search(s):
        return None
    m = _UPPER_ABCDE.search(s)
    if m:
        return m.group(0)
    low = s.lower()
    for letter, choice in choices:
        if low in choice.lower():
            return letter
    return None


def parse_robust(response: str | None, choices: Sequence[tuple[str, str]]) -> str | None:
    """The letter the reply actually names (or the one option whose text it is); None for empty output."""
    text = strip_reasoning(response)
    if not text:
        return None
    options = {letter: option_text(choice, letter) for letter, choice in choices}
    return parse_letter(text, letters=tuple(options) or tuple(LETTERS), options=options)


# the official prompt has a space before the newline (yfzhang114/MME-RealWorld@87096fc, model_vqa.py);
# evalkit 0.1 sent none: records of both are read back
_MARKERS = ("The choices are listed below: \n", "The choices are listed below:\n", "选项如下所示:\n")
_CHOICE_LINE = re.compile(r"^\(([A-Z])\)")


def choices_from_prompt(prompt: str) -> list[tuple[str, str]]:
    """The (letter, choice line) pairs of an MME-RealWorld prompt, read back from records.jsonl."""
    for marker in _MARKERS:
        if marker in prompt:
            block = prompt.split(marker, 1)[1]
            break
    else:
        return []
    out = []
    for line in block.split("\n"):
        m = _CHOICE_LINE.match(line)
        if not m:
            break
        out.append((m.group(1), line))
    return out


def choices_of(options: Mapping[str, str]) -> list[tuple[str, str]]:
    """(letter, "(X) text") pairs from letter -> text options."""
    return [(k, f"({k}) {v}") for k, v in options.items()]


def mode_comparison(records: Iterable[Record]) -> dict[str, Any]:
    """Both parsers re-run on every raw response: accuracy under each and how many answers differ."""
    n = official_ok = robust_ok = answers_differ = verdicts_differ = 0
    for r in records:
        n += 1
        if r.error is not None or r.response is None:
            continue
        choices = choices_from_prompt(r.prompt)
        off = parse_official(r.response, choices)
        rob = parse_robust(r.response, choices)
        official_ok += off == r.gold
        robust_ok += rob == r.gold
        answers_differ += off != rob
        verdicts_differ += (off == r.gold) != (rob == r.gold)
    return {"official_accuracy": 100.0 * official_ok / n if n else 0.0,
            "robust_accuracy": 100.0 * robust_ok / n if n else 0.0,
            "answers_differ": answers_differ, "verdicts_differ": verdicts_differ}


def build_prompt(template: str, question: str, options: Mapping[str, str]) -> str:
    """The official text: question, the "(X) text" lines as given, the language's ending."""
    return fill_template(template, question=question, choices="\n".join(c for _, c in choices_of(options)))


class MMERealWorld(Benchmark):
    """MME-RealWorld: official rule parsing (quirks included) or robust; Avg / Avg-C per task."""

    name = "mme-realworld"
    default_data = "mme-realworld/MME_RealWorld.json"
    headline_metric = "Avg"
    official_source = "yfzhang114/MME-RealWorld@87096fc (evaluation/model_vqa.py, eval_your_results.py)"

    @dataclass(frozen=True)
    class Options:
        mme_lang: str | None = option(help="mme-realworld: prompt language (default auto: _CN files and Chinese text); "
                                           "with --mme-set full, en/auto read the English parts, cn the Chinese",
                                      choices=("auto", "en", "cn"))
        mme_set: str = option("full", help="mme-realworld: which questions of the base64 release (default full: every "
                                           "part of the language; lite: MME-RealWorld-Lite's TSV)",
                              choices=("full", "lite"))


    def tables(self, metrics: dict[str, Any], label: str, options: dict[str, Any]) -> list[ReportTable]:
        """Tables 3 and 4 of the paper (perception and reasoning: accuracy per domain, Avg and Avg-C),
        one row each, then accuracy per sub-task."""
        out = []
        for number, task in ((3, "Perception"), (4, "Reasoning")):
            t = metrics.get(task)
            if not isinstance(t, dict):
                continue
            cols = [d for d in ("OCR", "RS", "DT", "MO", "AD") if d in t] + ["Avg", "Avg-C"]
            out.append(ReportTable(f"MME-RealWorld Table {number}: {task.lower()} (%)", ("model", *cols),
                                   [[label, *(t.get(c) for c in cols)], ["questions", *(
                                       (metrics.get("details") or {}).get("n_by_domain", {}).get(f"{task}/{c}")
                                       for c in cols[:-2]), t.get("n"), t.get("n")]], console=True))
        per = metrics.get("per_category") or {}
        n_by = (metrics.get("details") or {}).get("n_by_category") or {}
        out.append(ReportTable("Accuracy per sub-task (%)", ("task / domain / sub-task", "accuracy", "questions"),
                               [[k, v, n_by.get(k)] for k, v in per.items()]))
        return out

    def load(self, data: Path, images: Path | None, options: dict[str, Any], sink: Sink = STRICT) -> list[Item]:
        files = selected_data_files(Path(data), options)
        items = load_files(files, images, sink)
        lang = options.get("mme_lang") or "auto"
        lang = detect_lang(files, items) if lang == "auto" else lang
        return [Item(it.id, it.question, it.options, it.answer, it.images, it.category, {**it.meta, "lang": lang})
                for it in items]

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        templates = {lang: read_prompt("mme-realworld", f"{lang}.txt") for lang in ("en", "cn")}
        transform = Transform(max_side=options.get("max_side"), max_pixels=options.get("max_pixels"))
        params = GenParams(temperature=0.0, max_tokens=int(options.get("max_tokens") or 1024))
        for item in items:
            text = build_prompt(templates[item.meta.get("lang", "en")], item.question, item.options)
            parts = [ImagePart(ref, transform) for ref in item.images]
            yield Query(id=item.id, item_id=item.id, base_id=item.id, variant={},
                        messages=(Message.user(*parts, text),), gold=item.answer, options=dict(item.options),
                        params=params, category=item.category, meta={"question": item.question})

    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        choices = choices_of(query.options)
        if mode == "robust":
            if not strip_reasoning(text):
                return Parsed(None, "empty")
            answer = parse_robust(text, choices)
            if answer is not None:
                return Parsed(answer, "rule")
            return Parsed(None, "refusal", refusal=True) if is_refusal(text) else Parsed(None, "unparsed")
        answer = parse_official(text, choices)  # official: "" is "A", on purpose
        if answer is not None:
            return Parsed(answer, "official")
        return Parsed(None, "unparsed", refusal=is_refusal(text))

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None:
        question = str(query.meta.get("question") or query.prompt_text())
        return JudgeRequest(prompt=judge_prompt_mcq(question, query.options, strip_reasoning(text)),
                            valid=tuple(query.options))

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        return mme_metrics(records, modes=mode_comparison(records))

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """Avg (%): the item-weighted accuracy over every question (Avg-C, the mean over task x domain
        cells, is the second number), one observation per question."""
        return accuracy_table(records, "Avg")

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = [("Avg", metrics.get("Avg")), ("Avg-C", metrics.get("Avg-C"))]
        for task in ("Perception", "Reasoning"):
            if isinstance(metrics.get(task), dict):
                out += [(f"{task} Avg", metrics[task]["Avg"]), (f"{task} Avg-C", metrics[task]["Avg-C"])]
        e = metrics.get("e_rate") or {}
        out.append(("answered E % (gold E %)", f"{e.get('answered_E_rate', 0):.1f} ({e.get('gold_E_rate', 0):.1f})"))
        out.append(("answers official≠robust", (metrics.get("modes") or {}).get("answers_differ")))
        return out
