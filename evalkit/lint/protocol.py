"""Per-benchmark protocol checks: what only makes sense knowing how the benchmark asks and scores.

* IF-Bench asks every item under the 4 circular shifts of its options (CircularEval): two options
  with the same text collide, so the same reply is right under one shift's letter and wrong under
  another's, in English or in Chinese (casiatao/IF-Bench@fc784fc, evaluate/bench_evaluate.py).
* TDBench joins four rotation files on `index`: indices or categories that disagree are found by
  the loader (kind "rotation-mismatch"); here, option counts that differ across the rotations of
  one problem, and one problem showing the same picture at two rotations (the rotation was not
  applied).
* MME-RealWorld scores every row as a 5-option multiple-choice question: a row whose question type,
  task or domain is not one the official scoring knows (yfzhang114/MME-RealWorld@87096fc,
  evaluation/eval_your_results.py) would be scored as something it is not.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.core.findings import Finding
from evalkit.core.types import Item
from evalkit.lint.items import image_key, item_place, norm, views
from evalkit.lint.model import finding

# The option counts each benchmark's protocol has (TDBench's yes/no problems fill only A and B);
# a benchmark not listed (generic mcq) has no protocol count.
EXPECTED_OPTIONS: dict[str, tuple[int, ...]] = {"if-bench": (4,), "mme-realworld": (5,), "tdbench": (2, 4)}
# Benchmarks whose duplicate options are reported by their protocol check instead of the generic one.
OWN_DUPLICATE_OPTIONS = ("if-bench",)
MME_QUESTION_TYPES = ("multiple choice",)
# Benchmarks whose categories are separate sets: a question repeated across them is by design
# (POPE's random, popular and adversarial splits share their positive questions).
DUPLICATES_PER_CATEGORY = ("pope",)


def ifbench_collisions(items: Sequence[Item]) -> list[Finding]:
    """IF-Bench items (either language) with two options of the same text: an error when one of them
    is the gold text (each shift scores the same reply right under one letter, wrong under the
    other; with a repeating pattern two shifts are even the same request with different golds),
    else a warning (the shifts offer fewer real choices)."""
    from evalkit.protocols.circular import all_shifts

    out = []
    for it in items:
        for view in views(it):
            texts = [norm(v) for v in view.options.values()]
            dups = sorted({t for t in texts if texts.count(t) > 1})
            if not dups:
                continue
            letters = [[k for k, v in view.options.items() if norm(v) == t] for t in dups]
            gold = view.answer in view.options and norm(view.options[view.answer]) in dups
            same = []
            if view.answer in view.options:
                shown = [(s, tuple(norm(v) for v in o.values()), g) for s, o, g in all_shifts(view.options, view.answer)]
                same = [(a[0], b[0]) for i, a in enumerate(shown) for b in shown[i + 1:] if a[1] == b[1]]
            pairs = "; ".join("/".join(group) for group in letters)
            text = (f"options {pairs} ({view.label}) have the same text, so the circular shifts collide: "
                    + ("the gold text sits under two letters in every shift and only one is scored right"
                       if gold else "the shifts offer fewer real choices"))
            if same:
                text += f"; shifts {', '.join(f'{a} and {b}' for a, b in same)} are the same request with different golds"
            out.append(finding("error" if gold else "warning", "circular-collision", text, file=view.file,
                               items=(view.item,), where=view.where))
    return out


def tdbench_rotations(items: Sequence[Item]) -> list[Finding]:
    """Per official problem: option counts that differ across its rotations (warning), and the same
    picture at two rotations (warning: a model sees no rotation there)."""
    out = []
    for it in items:
        variants = it.meta.get("variants")
        if it.meta.get("form") != "official" or not isinstance(variants, dict) or len(variants) < 2:
            continue
        file, where = item_place(it)
        counts = {deg: len(v.get("options") or {}) for deg, v in variants.items()}
        if len(set(counts.values())) > 1:
            shown = ", ".join(f"{deg}°: {n}" for deg, n in sorted(counts.items()))
            out.append(finding("warning", "rotation-mismatch", f"index {it.id} has different option counts across "
                                                               f"its rotation files ({shown})", file=file,
                               items=(it.id,), where=where))
        seen: dict[tuple, int] = {}
        for deg, v in sorted(variants.items()):
            key = tuple(image_key(r) for r in (v.get("images") or ()))
            if key and key in seen:
                out.append(finding("warning", "rotation-not-applied", f"index {it.id} shows the same picture at "
                                                                      f"{seen[key]}° and {deg}°", file=file,
                                   items=(it.id,), where=where))
            seen.setdefault(key, deg)
    return out


def mme_question_types(items: Sequence[Item]) -> list[Finding]:
    """MME-RealWorld rows whose question type, task or domain the official scoring does not know."""
    from evalkit.metrics.mmerealworld import DOMAINS, TASKS, split_key

    out = []
    for it in items:
        file, where = item_place(it)
        qtype = it.meta.get("question_type")
        problems = []
        if qtype is not None and norm(qtype).replace("-", " ").replace("_", " ") not in MME_QUESTION_TYPES:
            problems.append(f"question type {qtype!r} is not multiple choice")
        task, domain, _ = split_key(it.category)
        if task not in TASKS:
            problems.append(f"task {it.meta.get('task', task)!r} is neither Perception nor Reasoning")
        if domain not in DOMAINS:
            problems.append(f"domain (Subtask) {it.meta.get('subtask', domain)!r} is none of {', '.join(DOMAINS)}")
        if problems:
            out.append(finding("warning", "question-type", "; ".join(problems) + ": scored as a 5-option "
                                                                                  "multiple-choice question anyway",
                               file=file, items=(it.id,), where=where))
    return out


def protocol_findings(bench: str, items: Sequence[Item]) -> list[Finding]:
    """The protocol checks of `bench` (none for a benchmark without any)."""
    if bench == "if-bench":
        return ifbench_collisions(items)
    if bench == "tdbench":
        return tdbench_rotations(items)
    if bench == "mme-realworld":
        return mme_question_types(items)
    return []
