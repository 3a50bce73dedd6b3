"""RGB-Th-Bench: Yes/No questions on single RGB images and RGB-thermal pairs (docs/protocols.md; arXiv:2503.19654).

Data: the public release tree, `Source N/<scene>/questions.json` (`{"data": [block, ...]}`)
next to `rgb.*` and `thermal.*`. A block holds the questions of one skill on one scene;
`data_id` is a string for "Single RGB Image" blocks and an [rgb, thermal] list for pairs,
and only its file name is used, resolved against the folder of questions.json (the release
writes paths relative to the source folder, and scene names contain spaces).

Item ids are `<source>/<scene>/b<block>/q<question>` (0-based, two-digit block), stable
across runs; the SAcc group (scene, skill) is recovered from the id and the category.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.benchmarks.base import Benchmark, JudgeRequest
from evalkit.benchmarks.lenient import STRICT, LenientLoad, Sink
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.findings import Finding
from evalkit.core.record import Parsed, Record
from evalkit.core.report_table import ReportTable
from evalkit.core.resources import fill_template, read_prompt
from evalkit.core.settings import option
from evalkit.core.text import data_json
from evalkit.core.types import GenParams, ImagePart, ImageRef, Item, Message, Query, Transform
from evalkit.grading.extract import is_refusal, judge_prompt_yesno, parse_yes_no, strip_reasoning
from evalkit.images.files import not_a_file
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.rgbth import ALL_SKILLS, PAPER_SKILLS, find_duplicates, prompt_group, rgbth_metrics

SINGLE = "Single RGB Image"
PAIR = "RGB-Thermal Pair"
SKILL_SETS = {"paper": PAPER_SKILLS, "all": ALL_SKILLS}

# ---------------------------------------------------------------------------------------
# Parsing (pure)
# ---------------------------------------------------------------------------------------

_SPECIAL_TOKEN = re.compile(r"<\|[^|<>]{1,40}\|>")


def parse_official(text: str | None) -> str | None:
    """The public scripts' rule: lower-case; of the substrings "yes" and "no" the earlier wins;
    neither is "Fail" (None). Substrings, so "I cannot say", "unknown" and "not" are No."""
    low = (text or "").lower()
    yes, no = low.find("yes"), low.find("no")
    if yes < 0 and no < 0:
        return None
    if no < 0 or 0 <= yes < no:
        return "Yes"
    return "No"


def parse_robust(text: str | None) -> str | None:
    """Whole words only, reasoning and chat-template tokens (GLM's <|begin_of_box|>) removed;
    a refusal or a reply committing to neither (or both) answers is None ("Fail")."""
    cleaned = _SPECIAL_TOKEN.sub(" ", strip_reasoning(text))
    if not cleaned.strip() or is_refusal(cleaned):
        return None
    return parse_yes_no(cleaned)


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def _question_files(data: Path) -> list[Path]:
    """Every questions.json under `data` (a release root, a Source folder, a scene, or the file)."""
    if data.is_file():
        return [data]
    if not data.is_dir():
        raise EvalkitError(f"{data}: not found")
    found = sorted(data.rglob("questions.json"), key=lambda p: p.parts)
    if not found:
        raise EvalkitError(f"{data}: no questions.json found (expected Source N/<scene>/questions.json)")
    return found


def _image(scene: Path, name: Any, where: str, sink: Sink = STRICT) -> ImageRef:
    """A data_id entry resolved by file name against the scene folder (Windows separators too)."""
    if not isinstance(name, str) or not name.strip():
        raise EvalkitError(f"{where}: data_id entry {name!r} is not a file name")
    path = scene / name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    problem = not_a_file(path)  # missing, a named pipe, a folder, a symlink loop
    if problem is not None:
        sink.content(f"{where}: {problem}: {path}")  # lenient: kept, lint names it
    return ImageRef.from_path(str(path))


def _answer(raw: Any, where: str, sink: Sink = STRICT) -> str:
    text = str(raw or "").strip().rstrip(".").capitalize()
    if text not in ("Yes", "No"):
        sink.content(f"{where}: answer {raw!r} is not Yes or No")  # lenient: kept, lint's yes/no check
    return text


def load_questions_file(path: Path, skills: Sequence[str] | None, sink: Sink = STRICT) -> list[Item]:
    """Items of one scene's questions.json; skills None keeps every skill in the file. Lenient
    (`sink`): a bad block or question is a problem and reading goes on."""
    where0 = str(path)
    try:
        doc = data_json.loads(read_caps.read_whole(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalkitError(f"{where0}: cannot read ({exc})") from exc
    blocks = doc.get("data") if isinstance(doc, dict) else doc
    if not isinstance(blocks, list):
        raise EvalkitError(f"{where0}: expected {{\"data\": [block, ...]}}")
    scene = path.parent
    scene_id = f"{scene.parent.name}/{scene.name}"
    items = []
    for b, block in enumerate(blocks):
        where = f"{where0}: block {b}"
        with sink.guard(path, row=f"block {b}", where=f"{scene_id}, block {b}"):
            if not isinstance(block, dict):
                raise EvalkitError(f"{where}: expected an object")
            skill = str(block.get("skill_type") or "").strip()
            dtype = str(block.get("data_type") or "").strip()
            if not skill:
                raise EvalkitError(f"{where}: no skill_type")
            if skills is not None and skill not in skills:
                continue
            ids = block.get("data_id")
            names = [ids] if isinstance(ids, str) else ids if isinstance(ids, list) else None
            if dtype == SINGLE and names and len(names) >= 1:
                images = (_image(scene, names[0], where, sink),)
            elif dtype == PAIR and names and len(names) == 2:
                images = (_image(scene, names[0], where, sink), _image(scene, names[1], where, sink))
            else:
                raise EvalkitError(f"{where}: data_type {dtype!r} with data_id {ids!r} is neither "
                                   f"'{SINGLE}' with one file nor '{PAIR}' with [rgb, thermal]")
            qas = block.get("QAs")
            if not isinstance(qas, list) or not qas:
                raise EvalkitError(f"{where}: no QAs")
            for q, qa in enumerate(qas):
                wq = f"{where}, question {q}"
                item_id = f"{scene_id}/b{b:02d}/q{q}"
                with sink.guard(path, row=f"block {b}, question {q}", items=(item_id,),
                                where=f"{scene_id}, block {b}"):
                    question = str((qa or {}).get("question") or "").strip() if isinstance(qa, dict) else ""
                    if not question:
                        if not isinstance(qa, dict):
                            raise EvalkitError(f"{wq}: empty question")
                        sink.content(f"{wq}: empty question")  # lenient: kept, lint's text check names it
                    items.append(Item(
                        id=item_id, question=question, options={}, answer=_answer(qa.get("answer"), wq, sink),
                        images=images, category=skill,
                        meta={"scene": scene_id, "skill": skill, "data_type": dtype, "block": b,
                              "prompt_group": prompt_group(skill) or "-"},
                    ))
    return items


def load_release(data: Path, skills: Sequence[str] | None = PAPER_SKILLS, sink: Sink = STRICT) -> list[Item]:
    """All items of a release tree, in path order then file order."""
    items: list[Item] = []
    for path in _question_files(data):
        with sink.guard(path, kind="unreadable-file"):
            items += load_questions_file(path, skills, sink)
    return items


def skill_selection(value: Any) -> tuple[str, ...] | None:
    """`paper` (14 skills, default), `all` (every skill in the files) or a comma list of names."""
    name = str(value or "paper").strip()
    if name == "all":
        return None
    if name in SKILL_SETS:
        return SKILL_SETS[name]
    chosen = tuple(s.strip() for s in name.split(",") if s.strip())
    unknown = [s for s in chosen if s not in ALL_SKILLS]
    if unknown or not chosen:
        raise EvalkitError(f"--skills: unknown skill(s) {', '.join(unknown) or name!r} (use paper, all or names)")
    return chosen


@lru_cache(maxsize=4)
def _template(name: str) -> str:
    """A prompt file, read once per process (thousands of questions share two templates)."""
    return read_prompt("rgb-th-bench", name)


def request_text(item: Item) -> str:
    """The fixed context of the item's prompt group followed by the question."""
    return fill_template(_template("pair.txt" if len(item.images) == 2 else "rgb.txt"), question=item.question)


# ---------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------


class RGBThBench(Benchmark):
    """RGB-Th-Bench: QAcc and SAcc per skill, per prompt group and overall."""

    name = "rgb-th-bench"
    default_data = "rgb-th-bench"
    headline_metric = "QAcc"
    official_source = ("huhanwj/RGB-Th-Benchmark@3250d05 (third-party scripts that scored the recorded answers; "
                       "the paper's authors released no code)")

    @dataclass(frozen=True)
    class Options:
        skills: str | None = option(help="rgb-th-bench: paper (14 skills, default), all (16 skills), or a comma list")

    def __init__(self) -> None:
        self.warnings: list[str] = []


    def load_lenient(self, data: Path, images: Path | None, options: dict[str, Any]) -> LenientLoad:
        sink = Sink(lenient=True)
        items: list[Item] = []
        with sink.guard(data, kind="unreadable-file"):
            items = load_release(Path(data), skill_selection(options.get("skills")), sink)
        return LenientLoad(items, sink.problems)

    def load(self, data: Path, images: Path | None, options: dict[str, Any]) -> list[Item]:
        items = load_release(Path(data), skill_selection(options.get("skills")))
        dups = find_duplicates((it.id, request_text(it), it.answer) for it in items)
        self.warnings = [d.message() for d in dups]
        return items

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        transform = Transform(max_side=options.get("max_side"), max_pixels=options.get("max_pixels"))
        params = GenParams(temperature=0.0, max_tokens=int(options.get("max_tokens") or 1024))
        for item in items:
            parts = [ImagePart(ref, transform) for ref in item.images]
            yield Query(id=item.id, item_id=item.id, base_id=item.id, variant={},
                        messages=(Message.user(*parts, request_text(item)),), gold=item.answer, params=params,
                        category=item.category, meta={**item.meta, "question": item.question})

    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        refusal = is_refusal(text)
        if not (text or "").strip():
            return Parsed(None, "empty")
        if mode == "robust":
            if refusal:
                return Parsed(None, "refusal", refusal=True)
            answer = parse_robust(text)
            return Parsed(answer, "rule" if answer else "fail")
        answer = parse_official(text)
        return Parsed(answer, "official" if answer else "fail", refusal=refusal)

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None:
        question = str(query.meta.get("question") or query.prompt_text())
        return JudgeRequest(prompt=judge_prompt_yesno(question, strip_reasoning(text)), valid=("Yes", "No"))

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        return rgbth_metrics(records)

    def tables(self, metrics: dict[str, Any], label: str, options: dict[str, Any]) -> list[ReportTable]:
        """Table 3 of the paper (QAcc and SAcc per prompt group, the paper's mean-of-skills definition,
        with its significance row), then the skills × (QAcc, SAcc) table with the group rows."""
        columns = metrics.get("columns") or {}
        groups = [g for g in ("RGB-Txt", "RGB-Th-Txt", "Overall") if g in columns]
        head = ("model", *(f"{g} {m}" for g in groups for m in ("QAcc", "SAcc")))
        row = [label, *(columns[g][m] for g in groups for m in ("QAcc", "SAcc"))]
        sig = ["significant above (p < 0.05)",
               *(columns[g][f"{m} significant above"] for g in groups for m in ("QAcc", "SAcc"))]
        paper = ReportTable("RGB-Th-Bench Table 3: QAcc and SAcc per prompt group (%)", head, [row, sig],
                            note="a group's score is the mean of its skills' scores (the paper's definition); "
                                 "pooled figures are in summary.json", console=True,
                            whole_set="its \"significant above\" row is a fixed-n test against chance, which a run "
                                      "that stopped on its own answers does not meet (the skills table below "
                                      "holds the estimates)")
        per = metrics.get("per_skill") or {}
        rows = [[skill, v["prompt_group"], v["QAcc"], v["SAcc"], v["questions"], v["groups"]]
                for skill, v in per.items()]
        rows += [[f"{g} (mean of skills)", g, columns[g]["QAcc"], columns[g]["SAcc"], columns[g]["questions"],
                  columns[g]["groups"]] for g in groups]
        detail = ReportTable("Skills × (QAcc, SAcc) (%)", ("skill", "prompt group", "QAcc", "SAcc", "questions",
                                                          "groups"), rows, console=True,
                             groups=[f"{g} (mean of skills)" for g in groups],
                             note="chance: QAcc 50%, SAcc 6.25% for groups of 4 questions")
        return [paper, detail]

    def findings(self, records: Sequence[Record]) -> list[Finding]:
        """The release's duplicate questions among these records (contradictory golds: errors)."""
        return [d.finding() for d in find_duplicates((r.item_id, r.prompt, r.gold) for r in records)]

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(k, metrics[k]) for k in ("QAcc", "SAcc", "QAcc (RGB-Txt)", "SAcc (RGB-Txt)",
                                           "QAcc (RGB-Th-Txt)", "SAcc (RGB-Th-Txt)") if k in metrics]

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """QAcc (%), the paper's: the mean over skills of each skill's question accuracy. One observation
        per question, strata the skills. The overall column averages every skill in the records (with
        --skills all the two text-reference skills too, though they are in neither prompt group), so
        no skill is left out. None without records (QAcc is then None, not a number)."""
        import numpy as np

        if not records:
            return None
        units = tuple(r.base_id for r in records)
        return ScoreTable("QAcc", units, np.array([float(r.correct is True) for r in records]),
                          tuple(r.category for r in records), 100.0, tuple(r.query_id for r in records))

