"""Statistics over repeated samples of the same queries (`--repeats N`): spread, agreement, votes, pass@k.

Pure functions over plain values (numbers, answers, verdicts), so each can be checked by hand; the
engine groups a run's records by query and repeat (evalkit.engine.repeats). Percentages are full
floats in 0..100, as in every other metric; rounding is the report's job.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass


def mean_sd(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and *sample* standard deviation (n - 1 in the denominator: the repeats are a sample of
    what the model might answer); sd is None for fewer than two values, both are None for none."""
    n = len(values)
    if n == 0:
        return None, None
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


@dataclass(frozen=True)
class Agreement:
    """How often a query's repeats say the same thing.

    all_same_pct: share of queries whose answers are all identical; modal_share_pct: mean over
    queries of the share of its answers that are the most frequent one (100 when all agree, 100/N
    when all N differ). An unreadable answer (None) is an answer like any other here."""

    queries: int
    all_same_pct: float | None
    modal_share_pct: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return {"queries": self.queries, "all_same_pct": self.all_same_pct, "modal_share_pct": self.modal_share_pct}


def agreement(groups: Iterable[Sequence[Hashable]]) -> Agreement:
    """Agreement over queries' answers; queries with fewer than two answers say nothing and are skipped."""
    same = 0
    shares: list[float] = []
    for answers in groups:
        if len(answers) < 2:
            continue
        top = Counter(answers).most_common(1)[0][1]
        same += top == len(answers)
        shares.append(top / len(answers))
    if not shares:
        return Agreement(0, None, None)
    return Agreement(len(shares), 100.0 * same / len(shares), 100.0 * math.fsum(shares) / len(shares))


def majority_answer(answers: Sequence[Hashable | None]) -> Hashable | None:
    """The most frequent answer; None (an unreadable answer or a failed request) casts no vote. A tie
    goes to the tied answer given first (lowest repeat), so the vote is reproducible; None when no
    answer was read at all."""
    votes = Counter(a for a in answers if a is not None)
    if not votes:
        return None
    best = max(votes.values())
    return next(a for a in answers if a is not None and votes[a] == best)


def majority_vote_pct(groups: Iterable[Sequence[tuple[Hashable | None, bool]]]) -> float | None:
    """Accuracy (%) of the majority answer over each query's (answer, correct) samples (self-consistency).

    Defined only where the verdict is a function of the answer alone (a single gold per query): if two
    samples of one query give the same answer and differ in verdict, it is None. A query without any
    read answer counts as wrong."""
    right = total = 0
    for samples in groups:
        verdict: dict[Hashable, bool] = {}
        for answer, correct in samples:
            if answer is None:
                continue
            if verdict.setdefault(answer, correct) != correct:
                return None
        total += 1
        winner = majority_answer([a for a, _ in samples])
        right += winner is not None and verdict[winner]
    return 100.0 * right / total if total else None


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of the chance that at least one of k samples drawn without replacement
    from n (c of them right) is right: 1 - C(n - c, k) / C(n, k) (Chen et al. 2021, "Evaluating Large
    Language Models Trained on Code", §2.1). Needs 1 <= k <= n and 0 <= c <= n."""
    if not (1 <= k <= n and 0 <= c <= n):
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_ks(groups: Iterable[Sequence[bool]], n: int) -> dict[int, float | None]:
    """pass@k (%) for k = 1..n, each the mean over queries holding at least k samples (a query whose
    later repeats are still missing counts for the k it has)."""
    counts = [(len(g), sum(bool(x) for x in g)) for g in groups]
    out: dict[int, float | None] = {}
    for k in range(1, n + 1):
        values = [pass_at_k(m, c, k) for m, c in counts if m >= k]
        out[k] = 100.0 * math.fsum(values) / len(values) if values else None
    return out
