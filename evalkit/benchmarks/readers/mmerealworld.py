"""Reading MME-RealWorld: the official JSON, the VLMEvalKit TSV, the base64 JSON parts, and which
files of a folder (a Hub snapshot of yifanzhang114/MME-RealWorld-Base64, or a folder of one's own)
a run reads. Every form becomes the same Items (ids, options, gold, scoring key "Task/DOMAIN/group"),
so the forms give identical prompts and metrics.

* Official JSON (`MME_RealWorld.json`, `MME_RealWorld_CN.json`): a list of records with Question_id,
  Image (relative to --images, else the file's folder), Text, Answer choices ("(A) ..."), Ground
  truth, Task, Subtask, Category; "Question type" in either spelling and Dataset are optional.
* VLMEvalKit TSV: index, image (base64, or another row's index), question, A..E or
  'multi-choice options', answer, category ("Task/Subtask"), l2-category (the Category).
* Base64 parts (`MME-RealWorld/MME_RealWorld_base64_{0..8}.json`, `MME-RealWorld-CN/
  MME_RealWorld_CN_base64_{0,1}.json`, ~4 GB each): lists of records with the TSV's fields, the
  image as base64 and the options as a list. Read forward (stream_json), each image left in its part
  as a span, read when its question is asked: loading holds the text, never the pictures.

A snapshot folder (it holds MME-RealWorld/, MME-RealWorld-CN/ or mme_realworld_lite.tsv): `--mme-set
full` reads every part of the language `--mme-lang` selects (auto and en: English, cn: Chinese) in
part order, `--mme-set lite` the Lite TSV. Any other folder must hold one .json or .tsv file, or
only base64 parts. Files are opened by the path given (the snapshot's links are never resolved).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.benchmarks.readers.mcq import ImagePaths, load_tsv
from evalkit.benchmarks.readers.stream_json import JsonRecord, json_records
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.text import data_json
from evalkit.core.types import Item
from evalkit.metrics.mmerealworld import scoring_key

EN_FOLDER, CN_FOLDER, LITE_TSV = "MME-RealWorld", "MME-RealWorld-CN", "mme_realworld_lite.tsv"
OPTIONS_LIST = "multi-choice options"
_B64_REQUIRED = ("index", "question", OPTIONS_LIST, "answer", "category", "l2-category")
_PART = re.compile(r"base64_(\d+)$", re.I)


_REQUIRED = ("Question_id", "Image", "Text", "Answer choices", "Ground truth", "Task", "Subtask", "Category")
_CHOICE = re.compile(r"^\s*\(([A-Z])\)")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CN_NAME = re.compile(r"(^|[_\-])cn([_\-]|$)", re.I)


def option_text(choice: str, letter: str) -> str:
    """ "(A) 13" -> "13": the option's own text, for the robust parser and the simulator."""
    return re.sub(rf"^\s*\(?{re.escape(letter)}\)\s*", "", choice, count=1).strip() or choice.strip()


def _choices(where: str, raw: Any, name: str = "Answer choices") -> dict[str, str]:
    """ "Answer choices" (or the base64 form's "multi-choice options") -> letter -> option text; the
    letter comes from "(X)" or the position."""
    if not isinstance(raw, list) or len(raw) < 2 or not all(isinstance(c, str) and c.strip() for c in raw):
        raise EvalkitError(f"{where}: '{name}' must be a list of at least two non-empty strings")
    out: dict[str, str] = {}
    for k, choice in enumerate(raw):
        m = _CHOICE.match(choice)
        letter = m.group(1) if m else chr(ord("A") + k)
        if letter in out:
            raise EvalkitError(f"{where}: option ({letter}) appears twice")
        out[letter] = (choice[m.end():].strip() or choice.strip()) if m else option_text(choice, letter)
    return out


def _item(where: str, item_id: str, *, question: str, options: dict[str, str], answer: str, images: tuple,
          task: str, subtask: str, category: str, meta: dict[str, Any], sink: Sink = STRICT) -> Item:
    """An Item after the checks both forms share; category is the scoring key Task/DOMAIN/group.
    Lenient: an empty question or a gold outside the options is kept, for lint's checks to name."""
    if not question:
        sink.content(f"{where}: empty question")
    for name, value in (("Task", task), ("Subtask", subtask), ("Category", category)):
        if not value:
            raise EvalkitError(f"{where}: empty {name}")
    answer = answer.strip().strip("()").upper()
    if answer not in options:
        sink.content(f"{where}: answer {answer!r} is not among the options {', '.join(options)}")
    return Item(id=item_id, question=question, options=options, answer=answer, images=images,
                category=scoring_key(task, subtask, category),
                meta={**meta, "task": task, "subtask": subtask, "raw_category": category})


def load_json(path: Path, images: Path | None = None, sink: Sink = STRICT) -> list[Item]:
    """Items from the official JSON list. A bad record is an error naming file and record (lenient,
    `sink`: a problem, and the next record is read)."""
    try:
        data = data_json.loads(read_caps.read_whole(path))
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalkitError(f"{path}: cannot read JSON ({exc})") from exc
    if not isinstance(data, list):
        raise EvalkitError(f"{path}: expected a JSON list of records")
    paths_of = ImagePaths(images or path.parent, sink)
    items: list[Item] = []
    first: dict[str, int] = {}
    for k, rec in enumerate(data, start=1):
        where = f"{path}: record {k}"
        qid = str(rec.get("Question_id") or "").strip() if isinstance(rec, Mapping) else ""
        with sink.guard(path, row=f"record {k}", items=(qid,) if qid else ()):
            if not isinstance(rec, Mapping):
                raise EvalkitError(f"{where}: expected an object")
            missing = [f for f in _REQUIRED if rec.get(f) in (None, "")]
            if missing:
                raise EvalkitError(f"{where}: missing {', '.join(missing)}")
            qid = str(rec["Question_id"]).strip()
            where = f"{where} ({qid})"
            if qid in first:
                sink.add(f"{where}: duplicate Question_id (first at record {first[qid]})", path, row=f"record {k}",
                         items=(qid,), kind="duplicate-id")
                continue
            first[qid] = k
            qtype = rec.get("Question type", rec.get("Question Type"))
            items.append(_item(
                where, qid, question=str(rec["Text"]).strip(), options=_choices(where, rec["Answer choices"]),
                answer=str(rec["Ground truth"]), images=(paths_of.ref(str(rec["Image"]), where),),
                task=str(rec["Task"]).strip(), subtask=str(rec["Subtask"]).strip(),
                category=str(rec["Category"]).strip(),
                meta={"question_type": qtype, "dataset": rec.get("Dataset"), "image": str(rec["Image"]),
                      **({"record": k, "source": str(path)} if sink.lenient else {})},
                sink=sink,
            ))
    return items


def load_vlmeval_tsv(path: Path, images: Path | None = None, sink: Sink = STRICT) -> list[Item]:
    """Items from the VLMEvalKit TSV (category "Task/Subtask", l2-category = Category; options in A..E,
    else in 'multi-choice options'). Read forward with the images left in the file (a Lite TSV is 2 GB)."""
    out = []
    # shared TSV reading: base64 cells (as spans), index references, bad rows
    for item in load_tsv(path, images, sink, stream=True, options_column=OPTIONS_LIST):
        where = f"{path}: row {item.meta.get('row')} (index {item.id})"
        task, _, subtask = str(item.category).partition("/")
        category = str(item.meta.get("l2-category") or "")
        options = {k: option_text(v, k) for k, v in item.options.items()}
        lint = {k: v for k, v in item.meta.items() if k in ("row", "source") or k.startswith("lint_")}
        with sink.guard(path, row=f"row {item.meta.get('row')}", items=(item.id,)):
            out.append(_item(where, item.id, question=item.question, options=options, answer=item.answer,
                             images=item.images, task=task, subtask=subtask, category=category,
                             meta={"question_type": None, "dataset": item.meta.get("Dataset"),
                                   **(lint if sink.lenient else {})}, sink=sink))
    return out


def detect_lang(path: Path | Sequence[Path], items: Sequence[Item]) -> str:
    """ "cn" for _CN files (by name: MME_RealWorld_CN.json, MME_RealWorld_CN_base64_0.json, the parts
    in the snapshot's MME-RealWorld-CN folder) or when most questions are Chinese, else "en"."""
    paths = [path] if isinstance(path, Path) else list(path)
    if any(_CN_NAME.search(p.stem) or p.parent.name == CN_FOLDER for p in paths):
        return "cn"
    chinese = sum(1 for it in items if _CJK.search(it.question))
    return "cn" if items and chinese * 2 > len(items) else "en"


# ---------------------------------------------------------------------------------- base64 parts


def _options_value(where: str, raw: Any) -> Any:
    """The options list; a string holding a list literal (a part written from a table) is read too."""
    if isinstance(raw, str):
        try:
            return ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            raise EvalkitError(f"{where}: '{OPTIONS_LIST}' is neither a list nor a list literal") from None
    return raw


def _base64_item(path: Path, rec: JsonRecord, sink: Sink) -> Item:
    f, where = rec.fields, f"{path}: record {rec.number}"
    if not isinstance(f.get("index"), (str, int)) or str(f["index"]).strip() == "":
        raise EvalkitError(f"{where}: no index")
    qid = str(f["index"]).strip()
    where = f"{where} (index {qid})"
    missing = [k for k in _B64_REQUIRED if f.get(k) in (None, "")]
    if rec.image is None:
        if "image" in f:
            raise EvalkitError(f"{where}: 'image' is not a base64 string")
        missing.insert(1, "image")
    if missing:
        raise EvalkitError(f"{where}: missing {', '.join(missing)}")
    for name in ("question", "answer", "category", "l2-category"):
        if not isinstance(f[name], str):
            raise EvalkitError(f"{where}: '{name}' is not text ({type(f[name]).__name__})")
    task, _, subtask = f["category"].partition("/")
    return _item(where, qid, question=f["question"].strip(),
                 options=_choices(where, _options_value(where, f[OPTIONS_LIST]), OPTIONS_LIST),
                 answer=f["answer"], images=(rec.image,), task=task.strip(), subtask=subtask.strip(),
                 category=f["l2-category"].strip(),
                 meta={"question_type": None, "dataset": f.get("Dataset"),
                       **({"record": rec.number, "source": str(path)} if sink.lenient else {})}, sink=sink)


def load_base64_parts(paths: Sequence[Path], sink: Sink = STRICT) -> list[Item]:
    """Items from base64 JSON parts, in the order given; an index must be unique across them. A bad
    record is an error naming part and record (lenient: a problem, and the next record is read)."""
    items: list[Item] = []
    first: dict[str, str] = {}
    for path in paths:
        with sink.guard(path, kind="unreadable-file"):  # lenient: a broken part costs its own records only
            for rec in json_records(path):
                row = f"record {rec.number}"
                qid = str(rec.fields.get("index", "")).strip()
                with sink.guard(path, row=row, items=(qid,) if qid else ()):
                    item = _base64_item(path, rec, sink)
                    if item.id in first:
                        sink.add(f"{path}: {row} (index {item.id}): duplicate index (first at {first[item.id]})",
                                 path, row=row, items=(item.id,), kind="duplicate-id")
                        continue
                    first[item.id] = f"{path.name} {row}"
                    items.append(item)
    return items


def is_base64_part(path: Path) -> bool:
    """Whether a .json file holds base64 records (index, image, ...) rather than the official ones
    (Question_id, Image, ...): its first record says, read alone."""
    for rec in json_records(path):
        return "Question_id" not in rec.fields and ("index" in rec.fields or rec.image is not None)
    return bool(_PART.search(path.stem))


def _parts(folder: Path) -> list[Path]:
    """The base64 parts in a folder, by part number."""
    found = [p for p in folder.iterdir() if p.suffix.lower() == ".json" and _PART.search(p.stem)]
    return sorted(found, key=lambda p: (int(_PART.search(p.stem).group(1)), p.name))  # type: ignore[union-attr]


def is_snapshot(folder: Path) -> bool:
    """A folder laid out like the Hub repository (one of its folders or the Lite TSV at the top)."""
    return (folder / EN_FOLDER).is_dir() or (folder / CN_FOLDER).is_dir() or (folder / LITE_TSV).is_file()


def selected_data_files(data: Path, options: Mapping[str, Any]) -> list[Path]:
    """The files a run with these options reads from `data` (a file, a snapshot or another folder)."""
    if not data.is_dir():
        return [data]
    if is_snapshot(data):
        mme_set, lang = options.get("mme_set") or "full", options.get("mme_lang") or "auto"
        if mme_set == "lite":
            if not (data / LITE_TSV).is_file():
                raise EvalkitError(f"{data}: no {LITE_TSV} for --mme-set lite")
            return [data / LITE_TSV]
        folder = data / (CN_FOLDER if lang == "cn" else EN_FOLDER)
        parts = _parts(folder) if folder.is_dir() else []
        if not parts:
            other = CN_FOLDER if lang != "cn" else EN_FOLDER
            hint = f"; {other}/ is there (--mme-lang {'cn' if lang != 'cn' else 'en'})" if (data / other).is_dir() \
                else ""
            raise EvalkitError(f"{data}: no base64 parts in {folder.name}/ for --mme-set full "
                               f"(--mme-lang {lang}){hint}; --mme-set lite reads {LITE_TSV}")
        return parts
    found = sorted(p for p in data.iterdir() if p.suffix.lower() in (".json", ".tsv"))
    parts = _parts(data)
    if len(found) != 1 and parts and len(parts) == len(found):
        return parts  # a folder of parts (the snapshot's MME-RealWorld/)
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise EvalkitError(f"{data}: expected one .json or .tsv file in the folder (or only base64 parts), "
                           f"found {names}")
    return found


def load_files(files: Sequence[Path], images: Path | None = None, sink: Sink = STRICT) -> list[Item]:
    """Items from the files `selected_data_files` chose: one TSV, one official JSON, or base64 parts."""
    suffixes = {p.suffix.lower() for p in files}
    if suffixes == {".tsv"} and len(files) == 1:
        return load_vlmeval_tsv(files[0], images, sink)
    if suffixes != {".json"}:
        names = ", ".join(str(p) for p in files)
        raise EvalkitError(f"{names}: unknown format (expected the official .json, base64 .json parts "
                           f"or a VLMEvalKit .tsv)")
    if len(files) == 1 and not is_base64_part(files[0]):
        return load_json(files[0], images, sink)
    return load_base64_parts(files, sink)
