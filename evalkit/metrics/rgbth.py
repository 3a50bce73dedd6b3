"""RGB-Th-Bench metrics: QAcc and SAcc per skill, per prompt group and overall, from records alone.

The paper scores a prompt group (and the whole benchmark) as the *mean of its skills'* scores;
the third-party summary pools the questions (correct / all). Both are reported, the paper's as
the official number. A record's scene and SAcc group come from its item id
(`<source>/<scene>/b<block>/q<question>`) and its category (the skill), so `evalkit report`
can recompute everything from records.jsonl without the dataset's block structure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from evalkit.core.findings import Finding
from evalkit.core.record import Record

RGB_TXT = (
    "Scene Understanding",
    "Detailed Object Presence",
    "Instance Attributes",
    "Instance Location w.r.t. Image",
    "Instance Spatial Relation",
    "Instance Counting",
    "Instance Interaction",
)
RGB_TH_TXT = (
    "Temperature to Color Mapping Understanding",
    "RGB-Thermal-Heatmap Alignment",
    "Instance Thermal Attribute",
    "Relative Thermal Attribute",
    "Warmest Areas Detection",
    "Coldest Areas Detection",
    "Risk and Anomaly Detection",
)
# In the public release only: single-RGB skills that belong to neither prompt group.
TEXT_REFERENCE = (
    "Numerical Text Reference Understanding",
    "Non-Numerical Text Reference Understanding",
)
PAPER_SKILLS = RGB_TXT + RGB_TH_TXT
ALL_SKILLS = PAPER_SKILLS + TEXT_REFERENCE
PROMPT_GROUPS: dict[str, tuple[str, ...]] = {"RGB-Txt": RGB_TXT, "RGB-Th-Txt": RGB_TH_TXT}
QACC_CHANCE = 0.5
SACC_CHANCE = 0.0625  # the paper's 1/2^4 for four questions per group
ALPHA = 0.05


def prompt_group(skill: str) -> str | None:
    """The paper's prompt group of a skill; None for skills outside both (text reference, unknown)."""
    for name, skills in PROMPT_GROUPS.items():
        if skill in skills:
            return name
    return None


def scene_of(item_id: str) -> str:
    """`Source 1/Fuse panel 2` from `Source 1/Fuse panel 2/b09/q3`."""
    return item_id.rsplit("/", 2)[0]


@lru_cache(maxsize=256)
def significance_threshold(n: int, chance: float, alpha: float = ALPHA) -> float | None:
    """Smallest accuracy (percent) whose count k beats `chance` with an exact one-sided binomial
    test, P(X >= k | n, chance) < alpha. None for n = 0. Cached: called per column per report."""
    if n <= 0:
        return None
    from scipy.stats import binom  # imported on first use: scipy.stats takes seconds to import

    def beats(k: int) -> bool:  # P(X >= k) < alpha; monotone in k
        return bool(binom.sf(k - 1, n, chance) < alpha)

    k = min(n + 1, max(0, int(binom.ppf(1 - alpha, n, chance))))  # the answer's neighbourhood, not a scan
    while k > 0 and beats(k - 1):
        k -= 1
    while k <= n and not beats(k):
        k += 1
    return 100.0 * k / n if k <= n else None


@dataclass(frozen=True)
class Duplicate:
    """One question text asked more than once on the same scene and images."""

    scene: str
    question: str
    items: tuple[str, ...]
    golds: tuple[str, ...]

    @property
    def contradictory(self) -> bool:
        return len(set(self.golds)) > 1

    def message(self) -> str:
        kind = "with contradictory gold answers" if self.contradictory else "with the same gold answer"
        golds = "/".join(self.golds)
        return (f"{self.scene}: the question {self.question!r} is asked {len(self.items)} times {kind} "
                f"({golds}; items {', '.join(self.items)})")

    def finding(self) -> Finding:
        """An error when the copies' gold answers contradict (no model can get both right), else a warning
        (the question weighs twice)."""
        return Finding("error" if self.contradictory else "warning", "duplicate-question", self.message(),
                       f"{self.scene}/questions.json", self.items, self.scene)

    def to_dict(self) -> dict[str, Any]:
        return {"scene": self.scene, "question": self.question, "items": list(self.items),
                "golds": list(self.golds), "contradictory": self.contradictory, "message": self.message()}


def find_duplicates(entries: Iterable[tuple[str, str, str]]) -> list[Duplicate]:
    """Duplicates among (item id, request text, gold): the same text on the same scene.

    The request text includes the fixed context, so an RGB-only and a pair question with the
    same wording (different images) are not duplicates. A model cannot answer the two copies
    differently, so a contradictory pair costs every model exactly one question.
    """
    seen: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    questions: dict[tuple[str, str], str] = {}
    for item_id, text, gold in entries:
        if not text.strip():
            continue
        key = (scene_of(item_id), " ".join(text.split()))
        seen[key].append((item_id, gold))
        questions.setdefault(key, text.strip().splitlines()[-1])  # the question follows the context
    return [Duplicate(key[0], questions[key], tuple(i for i, _ in hits), tuple(g for _, g in hits))
            for key, hits in seen.items() if len(hits) > 1]


def _pct(num: int, den: int) -> float:
    return 100.0 * num / den if den else 0.0


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class _Tally:
    """Questions and (scene, skill) groups of one skill."""

    questions: int = 0
    correct: int = 0
    fails: int = 0
    refusals: int = 0

    def add(self, record: Record) -> None:
        self.questions += 1
        self.correct += record.correct is True
        self.fails += record.error is None and record.parsed is None
        self.refusals += bool(record.refusal)


def rgbth_metrics(records: Sequence[Record], question_of: dict[str, str] | None = None) -> dict[str, Any]:
    """All RGB-Th-Bench numbers from graded records (category = skill).

    Errors (failed requests) count as not correct, like everywhere in evalkit; `fails` counts
    answers that are neither Yes nor No (the paper's "Fail"), `refusals` the refusals detected,
    whatever the parse mode made of them.
    """
    per: dict[str, _Tally] = defaultdict(_Tally)
    groups: dict[tuple[str, str], bool] = {}
    for r in records:
        skill = r.category
        per[skill].add(r)
        key = (scene_of(r.item_id), skill)
        groups[key] = groups.get(key, True) and r.correct is True
    passed: dict[str, list[bool]] = defaultdict(list)
    for (_, skill), ok in groups.items():
        passed[skill].append(ok)
    order = [s for s in ALL_SKILLS if s in per] + sorted(s for s in per if s not in ALL_SKILLS)

    per_skill: dict[str, dict[str, Any]] = {}
    for s in order:
        t = per[s]
        per_skill[s] = {"QAcc": _pct(t.correct, t.questions), "SAcc": _pct(sum(passed[s]), len(passed[s])),
                        "questions": t.questions, "groups": len(passed[s]), "fails": t.fails,
                        "refusals": t.refusals, "prompt_group": prompt_group(s) or "-"}

    def column(skills: Sequence[str]) -> dict[str, Any]:
        """Official (mean of skills) and pooled figures with their significance thresholds."""
        skills = [s for s in skills if s in per_skill]
        nq = sum(per_skill[s]["questions"] for s in skills)
        ng = sum(per_skill[s]["groups"] for s in skills)
        return {
            "QAcc": _mean([per_skill[s]["QAcc"] for s in skills]),
            "SAcc": _mean([per_skill[s]["SAcc"] for s in skills]),
            "QAcc pooled": _pct(sum(per[s].correct for s in skills), nq),
            "SAcc pooled": _pct(sum(sum(passed[s]) for s in skills), ng),
            "questions": nq,
            "groups": ng,
            "skills": len(skills),
            "QAcc significant above": significance_threshold(nq, QACC_CHANCE),
            "SAcc significant above": significance_threshold(ng, SACC_CHANCE),
        }

    columns = {name: column(skills) for name, skills in PROMPT_GROUPS.items()}
    columns["Overall"] = column(order)
    metrics: dict[str, Any] = {}
    for name in ("Overall", *PROMPT_GROUPS):
        c = columns[name]
        suffix = "" if name == "Overall" else f" ({name})"
        metrics[f"QAcc{suffix}"] = c["QAcc"]
        metrics[f"SAcc{suffix}"] = c["SAcc"]
    # The third-party summary's column names, pooled; its 9-skill "SAcc (RGB-Th-Txt)" is not copied.
    metrics["pooled"] = {
        f"{m} ({name})": columns[name][f"{m} pooled"] for name in ("Overall", *PROMPT_GROUPS) for m in ("QAcc", "SAcc")
    }
    metrics["significance"] = {
        f"{m} ({name})": columns[name][f"{m} significant above"]
        for name in ("Overall", *PROMPT_GROUPS) for m in ("QAcc", "SAcc")
    }
    metrics["columns"] = columns
    metrics["per_skill"] = per_skill
    metrics["fails"] = sum(t.fails for t in per.values())
    metrics["refusals"] = sum(t.refusals for t in per.values())
    metrics["n_questions"] = len(records)
    metrics["n_groups"] = len(groups)
    dups = find_duplicates((r.item_id, r.prompt or (question_of or {}).get(r.item_id, ""), r.gold) for r in records)
    metrics["warnings"] = [d.message() for d in dups]
    metrics["duplicates"] = [d.to_dict() for d in dups]
    return metrics
