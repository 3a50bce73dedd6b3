"""IF-Bench (infrared 4-option MCQ): circular x bilingual evaluation, hybrid judgment, GenViP.

Protocol: docs/protocols.md, docs/official-ifbench.md and the paper (arXiv 2512.09663). Every
item is asked under the 4 circular shifts in English and in Chinese (680 x 8 = 5,440 queries),
with the official code's prompt strings (casiatao/IF-Bench@fc784fc, evaluate/bench_evaluate.py)
unless `--if-prompt paper`. Official judgment is the first character of the reply (after
`</think>`), with the official extractor (evaluate/qwen3_infer.py) when that character is not A-D,
whose reply counts only when it starts with A-D; robust mode tries a proper letter parser first and
reads the extractor leniently. GenViP pairs each infrared image with its RGB translation (IR first).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.benchmarks.base import Benchmark, JudgeRequest
from evalkit.benchmarks.ifbench_judge import (
    LETTERS,
    extractor_prompt,
    judgment_counts,
    official_reply_letter,
    official_rule,
    robust_rule,
)
from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.benchmarks.readers.ifbench import (
    LANGS,
    default_image_dir,
    dimension_of,
    entries,
    find_image,
    item_ids,
    parse_item,
)
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Parsed, Record
from evalkit.core.resources import read_prompt
from evalkit.core.settings import option
from evalkit.core.text import data_json
from evalkit.core.types import GenParams, ImagePart, ImageRef, Item, Message, Query, Transform
from evalkit.grading.extract import parse_judge_reply
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.ifbench import IFBenchScored, ifbench_metrics, item_scores
from evalkit.protocols.circular import all_shifts

_PLACEHOLDER = re.compile(r"<input_question>|<input_options>")
JUDGE_VALID = (*LETTERS, "F")  # robust: "F" (the extractor found no option) is an answer, scored wrong
PROMPT_SETS = ("official", "paper")  # --if-prompt: the official code's strings, or the paper's figures


# ---------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------


def options_dict_str(options: Mapping[str, str]) -> str:
    """The options exactly as the official code prints them: Python's str() of the dict."""
    return str(dict(options))


def fill(template: str, question: str, options: Mapping[str, str]) -> str:
    """Replace the paper's placeholders in one pass (a question holding one stays as is)."""
    values = {"<input_question>": question, "<input_options>": options_dict_str(options)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(0)], template)


def official_fill(template: str, question: str, options: Mapping[str, str]) -> str:
    """The official construction: replace the question, then the options (`str()` of the dict) in the result."""
    return template.replace("<input_question>", str(question)).replace("<input_options>", options_dict_str(options))


def prompt_file(kind: str, lang: str, prompt_set: str | None) -> str:
    """prompts/if-bench/ file of a prompt: `<kind>_<lang>.txt` (official) or `paper_<kind>_<lang>.txt`."""
    return f"{kind}_{lang}.txt" if (prompt_set or "official") == "official" else f"paper_{kind}_{lang}.txt"


def prompt_kind(options: Mapping[str, Any]) -> str:
    """Which prompt the flags select; as in the official code, translated replaces prior without pairing."""
    if options.get("genvip"):
        return "prior_pair" if options.get("prior") else "pair"
    if options.get("translated"):
        return "translated"
    return "prior" if options.get("prior") else "normal"


def parse_langs(value: Any) -> tuple[str, ...]:
    """`--lang en,cn` (default both) as a tuple in the order given, validated."""
    if value is None or value == "":
        return LANGS
    parts = value.split(",") if isinstance(value, str) else list(value)
    langs = tuple(dict.fromkeys(str(p).strip().lower() for p in parts if str(p).strip()))
    bad = [x for x in langs if x not in LANGS]
    if bad or not langs:
        raise EvalkitError(f"--lang: expected en, cn or en,cn, not {value!r}")
    return langs


# ---------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------


class IFBench(Benchmark):
    name = "if-bench"
    default_data = "if-bench/if_bench_sample.json"
    headline_metric = "Avg"
    official_source = "casiatao/IF-Bench@fc784fc (evaluate/bench_evaluate.py, evaluate/qwen3_infer.py)"
    deviations = (
        "the extractor is the model --judge names, asked once at temperature 0 with replies capped at 64 tokens "
        "(cached); the official one is a local Qwen/Qwen3-8B, thinking off, with its default generation settings",
        "without --judge, a reply whose first character is not A-D stays unparsed and counts wrong; the official "
        "code always asks its extractor",
    )

    @dataclass(frozen=True)
    class Options:
        lang: str | None = option(help="if-bench: languages to ask, en, cn or en,cn (default both)")
        if_prompt: str = option("official", help="if-bench: request text, official (the official code's English "
                                                 "and Chinese strings, default) or paper (the paper's figures, "
                                                 "as evalkit 0.1 sent them)", choices=PROMPT_SETS)
        genvip: bool = option(False, help="if-bench: GenViP, ask with the IR image then its RGB translation "
                                          "(--translated-images)")
        prior: bool = option(False, help="if-bench: add the textual prior (Fig. 13)")
        translated: bool = option(False, help="if-bench: ask with the RGB translation alone")
        translated_images: str | None = option(
            help="if-bench: folder of RGB translations, same file names (default <data dir>/translated_rgb_imgs)",
            role="operational")  # the images' content enters the identity through the data fingerprint
        skip_missing: bool = option(False, help="skip items whose image file is missing (counted in the summary) "
                                                "instead of failing")

    def __init__(self) -> None:
        self.skipped: list[str] = []  # image files missing under --skip-missing, for the summary


    # ---- load / expand ---------------------------------------------------------------
    def load(self, data: Path, images: Path | None, options: dict[str, Any], sink: Sink = STRICT) -> list[Item]:
        path = Path(data)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() == ".json" and "image_list" not in p.name)
            if len(found) != 1:
                raise EvalkitError(f"{path}: expected one IF-Bench .json file in the folder, found {len(found)}")
            path = found[0]
        try:
            raw = data_json.loads(read_caps.read_whole(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalkitError(f"{path}: cannot read ({exc})") from exc
        except json.JSONDecodeError as exc:
            raise EvalkitError(f"{path}: invalid JSON ({exc})") from exc
        found_entries = entries(raw, path)
        # ids come from each entry's dimension and place, so a bad entry (lenient) shifts no other id
        with_dim = [k for k, (_, dim, obj) in enumerate(found_entries) if dimension_of(dim, obj)]
        ids = dict(zip(with_dim, item_ids([{"dimension": dimension_of(*found_entries[k][1:])} for k in with_dim]),
                       strict=True))
        rows: list[tuple[str, dict[str, Any], str]] = []
        for k, (where, dim, obj) in enumerate(found_entries):
            with sink.guard(path, row=where.split(": ", 1)[-1], items=(ids[k],) if k in ids else ()):
                rows.append((where, parse_item(where, dim, obj, sink), ids.get(k, "")))
        ir_dir = images or default_image_dir(path, "infrared_imgs")
        kind = prompt_kind(options)
        rgb_dir: Path | None = None
        if kind in ("pair", "prior_pair", "translated"):
            given = options.get("translated_images")
            rgb_dir = Path(given).expanduser() if given else default_image_dir(path, "translated_rgb_imgs")
            if not rgb_dir.is_dir():
                raise EvalkitError(f"--translated-images: not a directory: {rgb_dir}")
        skip = bool(options.get("skip_missing"))
        self.skipped = []
        items = []
        for where, row, item_id in rows:
            refs = []
            # as the official code: the infrared image under its path, its translation by file name alone
            for folder, label, name in ((ir_dir, "image", row["image"]),
                                        (rgb_dir, "translated image", Path(row["image"]).name)):
                if folder is None:
                    continue
                found = find_image(folder, name)
                if found is None and sink.lenient:  # kept under its expected path: lint names it missing
                    found = folder / name
                if found is None:
                    if not skip:
                        raise EvalkitError(f"{where}: {label} not found: {folder / name} "
                                           f"(use --skip-missing to skip such items)")
                    self.skipped.append(str(folder / name))
                    break
                refs.append(ImageRef.from_path(str(found)))
            else:
                items.append(Item(id=item_id, question=row["en_question"], options=row["en_options"],
                                  answer=row["answer"], images=tuple(refs), category=row["dimension"],
                                  meta={**row, "where": where}))
        return items

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        kind = prompt_kind(options)
        langs = parse_langs(options.get("lang"))
        prompt_set = options.get("if_prompt") or "official"
        templates = {lang: read_prompt("if-bench", prompt_file(kind, lang, prompt_set)) for lang in langs}
        filler = official_fill if prompt_set == "official" else fill
        transform = Transform(max_side=options.get("max_side"), max_pixels=options.get("max_pixels"))
        params = GenParams(temperature=0.0, max_tokens=int(options.get("max_tokens") or 1024))
        for item in items:
            refs = item.images
            if kind == "translated":
                refs = refs[1:]  # the RGB translation alone
            elif kind in ("normal", "prior"):
                refs = refs[:1]
            parts = [ImagePart(ref, transform) for ref in refs]
            for lang in langs:
                question, opts = item.meta[f"{lang}_question"], item.meta[f"{lang}_options"]
                for shift, shown, gold in all_shifts(opts, item.answer):
                    yield Query(
                        id=f"{item.id}|s{shift}|{lang}", item_id=item.id, base_id=item.id,
                        variant={"shift": shift, "lang": lang},
                        messages=(Message.user(*parts, filler(templates[lang], question, shown)),),
                        gold=gold, options=shown, params=params, category=item.category,
                        meta={"lang": lang, "question": question},
                    )

    # ---- parse / score -----------------------------------------------------------------
    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        if mode == "robust":
            return robust_rule(text, query.options)
        return official_rule(text, tuple(query.options) or LETTERS)

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None:
        prompt = extractor_prompt(text, mode)
        if prompt is None:
            return None  # robust: only thinking, nothing an extractor may see
        return JudgeRequest(prompt=prompt, valid=LETTERS if mode == "official" else JUDGE_VALID)

    def judge_verdict(self, query: Query, response: str, reply: str, valid: Sequence[str], mode: str) -> Parsed:
        """Official: the reply's first character if A-D (`official_reply_letter`), else unresolved (wrong,
        as the official fallback is). Robust: its first valid token anywhere, "F" an answer scored wrong."""
        answer = official_reply_letter(reply) if mode == "official" else parse_judge_reply(reply, valid)
        return Parsed(answer, "llm") if answer is not None else Parsed(None, "llm_unresolved")

    # ---- aggregate ---------------------------------------------------------------------
    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        metrics: dict[str, Any] = dict(ifbench_metrics(self._outcomes(records), parse_langs(options.get("lang"))))
        shown = _shown_options(records)
        metrics["judgment"] = judgment_counts(records, shown)
        unparsed = sum(1 for r in records if r.error is None and r.parsed is None and not r.refusal)
        metrics["judgment"]["unparsed_counted_wrong"] = unparsed
        metrics["prompt"] = prompt_kind(options)
        metrics["prompt_set"] = options.get("if_prompt") or "official"
        metrics["n_items"] = len({r.item_id for r in records})
        metrics["skipped_missing_images"] = len(self.skipped)
        return metrics

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in metrics.items() if k.startswith("Avg")]

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """Avg (%): one observation per (item, language), its share of circular shifts right, strata
        the (language, dimension) cells, resampled by item (both languages and all shifts together).

        Avg is the mean over languages of the unweighted mean over each language's dimensions. That
        is the plain mean over (language, dimension) cells whenever every language has the same
        number of dimensions (any complete run). When they differ (a partial run), a language with
        fewer dimensions would weigh less in the cell mean, so its cells are repeated (copies whose
        stratum ends in "#k", each holding the same observations) until every language has
        lcm(dimension counts) cells: the cell mean is then exactly Avg, also under resampling.
        """
        import numpy as np

        langs = parse_langs(options.get("lang"))
        unit_of = {r.item_id: r.base_id for r in records}
        scores = item_scores(self._outcomes(records))
        present = [lg for lg in langs if any(lang == lg for _, lang in scores)]
        dims = {lg: {dim for (_, lang), (dim, _, _) in scores.items() if lang == lg} for lg in present}
        common = math.lcm(*(len(d) for d in dims.values())) if present else 1
        units: list[str] = []
        values: list[float] = []
        strata: list[str] = []
        for (item, lang), (dim, share, _) in scores.items():
            if lang not in dims:
                continue  # a language not asked for in these options is not in Avg
            for copy in range(common // len(dims[lang])):
                units.append(unit_of[item])
                values.append(share)
                strata.append(f"{lang}|{dim}" + (f"#{copy}" if copy else ""))
        return ScoreTable("Avg", tuple(units), np.array(values), tuple(strata), 100.0)

    @staticmethod
    def _outcomes(records: Sequence[Record]) -> list[IFBenchScored]:
        return [IFBenchScored(r.item_id, r.category, str(r.variant.get("lang", "en")), int(r.variant.get("shift", 0)),
                        r.correct is True) for r in records]

    def tables(self, metrics: dict[str, Any], label: str, options: dict[str, Any]) -> list[Any]:  # ReportTables
        """The paper's Table 2 as one row, then dimensions × language (evalkit.benchmarks.ifbench_tables)."""
        from evalkit.benchmarks.ifbench_tables import ifbench_tables

        return ifbench_tables(metrics, label)


def _shown_options(records: Sequence[Record]) -> dict[str, dict[str, str]]:
    """Options per query id, recovered from the prompt's dict literal (records do not store them)."""
    import ast

    out: dict[str, dict[str, str]] = {}
    for r in records:
        start = r.prompt.rfind("{'A'")
        if start < 0:
            start = r.prompt.rfind('{"A"')
        if start < 0:
            continue
        end = r.prompt.find("}", start)
        while end >= 0:
            try:
                value = ast.literal_eval(r.prompt[start : end + 1])
            except (ValueError, SyntaxError):
                end = r.prompt.find("}", end + 1)
                continue
            if isinstance(value, dict):
                out[r.query_id] = {str(k): str(v) for k, v in value.items()}
            break
    return out
