"""TDBench (top-down images, RotationalEval): docs/protocols.md, paper arXiv:2504.03748 §3-4.

Two input forms, one set of queries:

* **official**: a folder with `tdbench_rot{0,90,180,270}.tsv` (VLMEvalKit TSVs, base64 images,
  rotated images and direction words already baked in) joined on `index`, and optionally
  `tdbench_grounding_rot*.tsv` (question = object name, answer = a box). A single TSV (a case
  study file) is one rotation of plain MCQs.
* **generated**: a JSONL top-down set with image paths and templated text (see
  `protocols.rotation`); each item is rotated 0/90/180/270 degrees counter-clockwise here,
  its placeholders re-rendered and its options shuffled per rotation with a seed.
  `export_official` writes such a set as the official four TSVs.

Query ids are f"{index}|r{deg}", base_id the index, variant {"rot": deg} (+ "task": "grounding").

Requests are VLMEvalKit's in both modes (docs/official-tdbench.md): its MCQ layout and its grounding
wording, images from the official files as stored. The mode changes how answers are read: official
mode is VLMEvalKit's `can_infer` and `extract_bbox_from_string` (evalkit.grading.vlmeval), robust mode
evalkit's own lenient readers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalkit.benchmarks.base import Benchmark, JudgeRequest
from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.benchmarks.readers.mcq import load_tsv
from evalkit.benchmarks.readers.tdbench import (
    load_generated,
    load_official,
    official_files,
    png_bytes,
    variant_image,
    variant_text,
)
from evalkit.benchmarks.tdbench_boxes import box_values, format_box, parse_box, source_size
from evalkit.benchmarks.tdbench_missing import DroppedOption, dropped_finding, dropped_note, dropped_options
from evalkit.benchmarks.tdbench_tables import tdbench_tables
from evalkit.core.errors import EvalkitError
from evalkit.core.findings import Finding
from evalkit.core.record import Parsed, Record
from evalkit.core.report_table import ReportTable
from evalkit.core.resources import fill_template, read_prompt
from evalkit.core.settings import option
from evalkit.core.types import GenParams, ImagePart, ImageRef, Item, Message, Query, Transform
from evalkit.grading import vlmeval
from evalkit.grading.extract import (
    is_refusal,
    judge_prompt_mcq,
    parse_judge_reply,
    parse_letter,
    render_options,
    strip_reasoning,
)
from evalkit.metrics import tdbench as tdm
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.protocols import rotation as rot


def parse_official_letter(text: str, options: dict[str, str], parser: str = "3ba9220a") -> str | None:
    """VLMEvalKit's rule step (`can_infer`): a letter, or None when it reads no option ("Z") or none at all."""
    letter = vlmeval.can_infer(text, options, parser)
    return None if letter == vlmeval.NO_OPTION else letter


def _fitted(wh: tuple[int, int], max_side: int | None, max_pixels: int | None) -> tuple[int, int]:
    """The size an image is sent at under the run's limits (downscale only): pixel boxes are read in it."""
    w, h = wh
    scale = min(1.0, (max_side / max(w, h)) if max_side else 1.0, math.sqrt(max_pixels / (w * h)) if max_pixels else 1.0)
    return (max(1, round(w * scale)), max(1, round(h * scale))) if scale < 1 else (w, h)


class TDBench(Benchmark):
    name = "tdbench"
    default_data = "tdbench"
    headline_metric = "RE"
    official_source = ("open-compass/VLMEvalKit@3ba9220a (vlmeval/dataset/utils/tdbench.py, "
                       "vlmeval/utils/matching_util.py, vlmeval/dataset/utils/multiple_choice.py, "
                       "vlmeval/dataset/image_mcq.py, vlmeval/dataset/image_vqa.py)")
    deviations = (
        "after a failed judge step VLMEvalKit picks a random option; evalkit keeps the answer unparsed (not correct)",
        "VLMEvalKit asks its extractor up to three times when a reply names no option; evalkit asks once "
        "(temperature 0, cached)",
        "VLMEvalKit writes each TSV image to <index>.jpg through PIL before sending (a JPEG re-encode at the "
        "stored size); evalkit sends the stored bytes",
    )

    @dataclass(frozen=True)
    class Options:
        td_set: str | None = option(help="which TDBench files (default all: main and grounding; cases: the four "
                                         "case-study TSVs of the paper's section 5)",
                                    choices=("all", "main", "grounding", "cases"))
        td_image_size: int | None = option(
            help="standardise the images of sets evalkit rotates itself to NxN (default 512; 0 = as stored); "
                 "images of the official TSV files are always sent as stored", at_least=0)
        td_seed: int | None = option(help="seed of the per-rotation option shuffle (generated sets)")
        td_grounding: str | None = option(help="grounding hit: centre in box or IoU", choices=("center", "iou"))
        td_iou: float | None = option(help="IoU threshold for --td-grounding iou (default 0.5)", above=0)
        td_any_category: bool = option(False, help="accept category names outside the paper's ten")
        td_boot: int = option(200, help="bootstrap resamples of the reliability fit's intervals (default 200)", at_least=1)
        td_parser: str | None = option(
            help="official mode's VLMEvalKit can_infer: 3ba9220a (the commit that added TDBench, default) "
                 "or latest (e8e78f0)", choices=vlmeval.PARSERS)


    def __init__(self) -> None:
        self.dropped: list[DroppedOption] = []  # option cells read as missing by the last load (official mode)

    # ---- load / expand --------------------------------------------------------------------
    def load(self, data: Path, images: Path | None, options: dict[str, Any], sink: Sink = STRICT) -> list[Item]:
        """The items; in official mode (the default) a gold whose cell holds "None" is kept as VLMEvalKit
        keeps it (tdbench_missing.py), and the options so dropped are remembered for the run to say."""
        official = (options.get("mode") or "official") == "official"
        items = self._load(Path(data), images, options, sink, official)
        self.dropped = dropped_options(items)
        return items

    def load_notes(self) -> list[str]:
        note = dropped_note(self.dropped)
        return [note] if note else []

    def findings(self, records: Sequence[Record]) -> list[Finding]:
        found = dropped_finding(self.dropped, (r.query_id for r in records))
        return [found] if found else []

    def _load(self, data: Path, images: Path | None, options: dict[str, Any], sink: Sink,
              official: bool) -> list[Item]:
        strict = not options.get("td_any_category")
        which = options.get("td_set") or "all"
        if data.is_dir() and which == "cases":  # one rotation each; ids prefixed by the case, unique across files
            cases = sorted(data.glob("case_study_*.tsv"))
            if not cases:
                raise EvalkitError(f"{data}: no case_study_*.tsv files for --td-set cases")
            return [_single(replace(it, id=f"{p.stem.removeprefix('case_study_')}-{it.id}"))
                    for p in cases for it in load_tsv(p, images, sink, gold_may_be_missing=official)]
        if data.is_dir():
            found = official_files(data)
            if found:
                items: list[Item] = []
                for prefix, files in sorted(found.items()):
                    grounding = "grounding" in prefix.lower()
                    if which == "all" or (which == "grounding") == grounding:
                        items += load_official(files, grounding=grounding, strict=strict, sink=sink,
                                               gold_may_be_missing=official)
                if not items:
                    raise EvalkitError(f"{data}: no TDBench files for --td-set {which}")
                return items
            jsonl = sorted(data.glob("*.jsonl"))
            if len(jsonl) != 1:
                raise EvalkitError(f"{data}: expected tdbench_rot{{0,90,180,270}}.tsv files or one .jsonl file")
            data = jsonl[0]
        if data.suffix.lower() == ".jsonl":
            return load_generated(data, images, sink)
        if data.suffix.lower() == ".tsv":  # a case-study file: one rotation of plain MCQs
            return [_single(it) for it in load_tsv(data, images, sink, gold_may_be_missing=official)]
        raise EvalkitError(f"{data}: expected a folder of TDBench TSVs, a .tsv or a .jsonl file")

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        size = 512 if options.get("td_image_size") is None else int(options["td_image_size"])
        max_side, max_pixels = options.get("max_side"), options.get("max_pixels")
        if size:  # the run's image limits cap the standard size (the images stay square)
            size = min(size, max_side or size, math.isqrt(max_pixels) if max_pixels else size)
        seed = int(options.get("td_seed") or 0)
        mcq_t, ground_t = read_prompt("tdbench", "mcq.txt"), read_prompt("tdbench", "grounding.txt")
        params = GenParams(temperature=0.0, max_tokens=int(options.get("max_tokens") or 1024))
        sized = Transform(size=(size, size) if size else None, max_side=max_side, max_pixels=max_pixels)
        stored = Transform(max_side=max_side, max_pixels=max_pixels)  # as stored unless the run caps sizes
        parser = options.get("td_parser") or vlmeval.PARSERS[0]
        for item in items:
            task = item.meta.get("task", "mcq")
            official = item.meta.get("form") == "official"
            degs = sorted(item.meta["variants"]) if official else rot.ROTATIONS
            for deg in degs:
                question, opts, gold = variant_text(item, deg, seed)
                if official:  # VLMEvalKit sends the files' pictures as they are: no stretch, no re-encode
                    parts = [ImagePart(ref, stored) for ref in item.meta["variants"][deg]["images"]]
                    hint = str(item.meta["variants"][deg].get("hint") or "")
                elif len(item.images) == 1:
                    parts = [ImagePart(item.images[0], replace(sized, rotate=deg))]
                    hint = ""
                else:
                    canvas = ImageRef.from_bytes(png_bytes(variant_image(item, deg, size or 512)))
                    parts = [ImagePart(canvas, sized)]
                    hint = ""
                if task == "grounding":
                    text = fill_template(ground_t, object=question)
                    img_size = (size, size) if size and not official else _fitted(
                        source_size(parts[0].ref, 0 if official else deg), max_side, max_pixels)
                    meta = {"question": question, "task": task, "image_size": img_size,
                            "criterion": options.get("td_grounding") or "center",
                            "iou": float(options.get("td_iou") or 0.5)}
                    variant: dict[str, Any] = {"rot": deg, "task": "grounding"}
                else:
                    text = fill_template(mcq_t, hint=f"Hint: {hint}\n" if hint else "", question=question,
                                         options=render_options(opts))
                    meta = {"question": question, "task": task, "parser": parser}
                    variant = {"rot": deg}
                yield Query(id=f"{item.id}|r{deg}", item_id=item.id, base_id=item.id, variant=variant,
                            messages=(Message.user(*parts, text),), gold=gold, options=opts, params=params,
                            category=item.category, meta=meta)

    # ---- parse / score ---------------------------------------------------------------------
    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        if mode == "official":
            return self._parse_official(query, text)
        text = strip_reasoning(text)
        if not text:
            return Parsed(None, "empty")
        if query.meta.get("task") == "grounding":
            box = parse_box(text, query.meta.get("image_size"))
            return Parsed(format_box(box), "rule") if box else Parsed(None, "unparsed")
        letter = parse_letter(text, letters=tuple(query.options), options=query.options)
        if letter is not None:
            return Parsed(letter, "rule")
        if is_refusal(text):
            return Parsed(None, "refusal", refusal=True)
        return Parsed(None, "unparsed")

    @staticmethod
    def _parse_official(query: Query, text: str) -> Parsed:
        """VLMEvalKit's readers over the reply exactly as it came (no <think> removal, no refusal guess).

        A box is one relative `a, b, c, d` match or nothing (scored 0); a letter is `can_infer`'s, its
        "Z" (its refusal strings, a lone Z) is a refusal, and the rest is the extractor's, as there. A
        reply that pandas reads as NA ("None", "N/A", "", ...) is read as "nan", as after VLMEvalKit's
        xlsx round trip (`vlmeval.read_back`).
        """
        text = vlmeval.read_back(text)
        if query.meta.get("task") == "grounding":
            box = vlmeval.extract_bbox(text)  # kept exact (repr), so scoring reads back the very numbers
            return Parsed("[" + ", ".join(repr(v) for v in box) + "]", "rule") if box else Parsed(None, "unparsed")
        letter = vlmeval.can_infer(text, query.options, str(query.meta.get("parser") or vlmeval.PARSERS[0]))
        if letter == vlmeval.NO_OPTION:
            return Parsed(None, "refusal", refusal=True)
        return Parsed(letter, "rule") if letter else Parsed(None, "unparsed")

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None:
        """Official mode: VLMEvalKit's extractor prompt over the whole reply. Robust mode: evalkit's own
        prompt over the reply without its thinking."""
        if query.meta.get("task") == "grounding":
            return None
        question = str(query.meta.get("question") or query.prompt_text())
        if mode == "official":
            return JudgeRequest(vlmeval.judge_prompt(question, query.options, vlmeval.read_back(text)),
                                tuple(query.options))
        return JudgeRequest(judge_prompt_mcq(question, query.options, strip_reasoning(text)), tuple(query.options))

    def judge_verdict(self, query: Query, response: str, reply: str, valid: Sequence[str], mode: str) -> Parsed:
        """Official mode reads the extractor's reply with `can_infer`, as VLMEvalKit does; its "Z" or an
        unreadable reply leaves the answer unparsed (VLMEvalKit would retry, then pick at random)."""
        if mode != "official":
            answer = parse_judge_reply(reply, valid)
        else:
            answer = vlmeval.can_infer(reply or "", {k: query.options[k] for k in valid if k in query.options},
                                       str(query.meta.get("parser") or vlmeval.PARSERS[0]))
            answer = None if answer == vlmeval.NO_OPTION else answer
        return Parsed(answer, "llm") if answer is not None else Parsed(None, "llm_unresolved")

    def score(self, query: Query, parsed: Parsed) -> bool | None:
        if query.meta.get("task") != "grounding":
            return super().score(query, parsed)
        return grounding_hit(parsed.answer, query.gold, str(query.meta.get("criterion") or "center"),
                             float(query.meta.get("iou") or 0.5))

    # ---- aggregate -------------------------------------------------------------------------
    def _outcomes(self, records: Sequence[Record], options: dict[str, Any]
                  ) -> tuple[list[tdm.RotationOutcome], list[tuple[int, Any, Any]], tuple[int, ...]]:
        """(outcome per record, grounding (rot, predicted box, gold box) pairs, rotations asked)."""
        criterion = options.get("td_grounding") or "center"
        threshold = float(options.get("td_iou") or 0.5)
        rotations = tuple(sorted({int(r.variant.get("rot", 0)) for r in records})) or (0,)
        outcomes, pairs = [], []
        for r in records:
            deg = int(r.variant.get("rot", 0))
            if r.variant.get("task") == "grounding":
                gold = box_values(r.gold)
                pred = box_values(r.parsed) if r.parsed else None
                assert gold is not None
                pairs.append((deg, pred, gold))
                ok = r.error is None and grounding_hit(r.parsed, r.gold, criterion, threshold)
            else:
                ok = r.correct is True
            outcomes.append(tdm.RotationOutcome(r.base_id, r.category or "(none)", deg, bool(ok)))
        return outcomes, pairs, rotations

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        criterion = options.get("td_grounding") or "center"
        threshold = float(options.get("td_iou") or 0.5)
        outcomes, pairs, rotations = self._outcomes(records, options)
        metrics = tdm.tdbench_metrics(outcomes, rotations, n_boot=int(options.get("td_boot") or 200))
        # VLMEvalKit's table is per file: the multiple-choice file's categories, grounding apart
        is_box = [r.variant.get("task") == "grounding" for r in records]  # outcomes are in record order
        mc = tdm.vlmevalkit_table([o for o, box in zip(outcomes, is_box, strict=True) if not box], rotations)
        metrics["vlmevalkit_average"] = mc["average"]
        metrics["vlmevalkit_per_category"] = mc["per_category"]
        if pairs:
            metrics["grounding"] = tdm.grounding_metrics(pairs, rotations, threshold)
            metrics["grounding_criterion"] = criterion if criterion == "center" else f"iou>={threshold:g}"
            metrics["grounding_vlmevalkit"] = tdm.vlmevalkit_table(
                [o for o, box in zip(outcomes, is_box, strict=True) if box], rotations)["average"]
        return metrics

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]:
        names = ("RE", "VE", "MA", "theta", "r", "g", "A_adj")
        head = [(k, metrics[k]) for k in names if k in metrics]
        avg = metrics.get("vlmevalkit_average") or {}
        if avg.get("hit_all") is not None:  # VLMEvalKit's own "Average" row (categories of the MC file)
            head.append(("VLMEvalKit Average hit_all", avg["hit_all"]))
        return head

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """RE (a fraction): one observation per (problem, category), 1 when right at every rotation
        asked in the run, strata the categories (the paper's unweighted mean over its dimensions).
        Grounding problems count with the run's hit criterion, exactly as in `aggregate`."""
        import numpy as np

        outcomes, _, rotations = self._outcomes(records, options)
        problems: dict[tuple[str, str], dict[int, bool]] = {}
        for o in outcomes:  # the last answer of a (problem, rotation) wins, as in category_stats
            problems.setdefault((o.problem, o.category), {})[o.rot] = o.correct
        keys = list(problems)
        values = [float(all(problems[k].get(rot) is True for rot in rotations)) for k in keys]
        return ScoreTable("RE", tuple(p for p, _ in keys), np.array(values), tuple(c for _, c in keys), 1.0)

    def tables(self, metrics: dict[str, Any], label: str, options: dict[str, Any]) -> list[ReportTable]:
        """The paper's Tables 2 and 3 as one row each, then the category, reliability, VLMEvalKit and
        grounding tables (evalkit.benchmarks.tdbench_tables)."""
        return tdbench_tables(metrics, label)


def grounding_hit(parsed: str | None, gold: str, criterion: str, threshold: float) -> bool:
    """Whether a parsed box counts as right: its centre in the true box, or IoU >= threshold.

    Computed as VLMEvalKit computes it, on the box as stored (robust boxes are already ordered and
    relative, so the same formulas give the same verdicts for them)."""
    pred, true = box_values(parsed), box_values(gold)
    if pred is None or true is None:
        return False
    return vlmeval.centroid_inside(pred, true) if criterion == "center" else vlmeval.bbox_iou(pred, true) >= threshold


def _single(item: Item) -> Item:
    """A case-study row as a one-rotation official item."""
    v = {"question": item.question, "options": dict(item.options), "answer": item.answer, "images": item.images,
         "hint": item.meta.get("hint") or ""}
    if item.meta.get("dropped_options"):
        v["dropped_options"] = list(item.meta["dropped_options"])
    return Item(item.id, item.question, item.options, item.answer, item.images, item.category,
                {**item.meta, "form": "official", "task": "mcq", "variants": {0: v}})
