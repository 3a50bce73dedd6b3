"""Balance statistics (info): where the gold answers sit, and how many yes/no golds are Yes.

A set whose golds pile up on one letter (or on Yes) rewards a model's position (or agreement)
bias: "always A" scores above chance. The test is Pearson's chi-square against uniform (scipy),
where an item with k options expects 1/k of a gold on each of its letters, so items with different
option counts mix correctly. Reported: the whole set always, and each category whose golds differ
from uniform at p < ALPHA; cells expecting fewer than MIN_EXPECTED golds are not tested.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from evalkit.core.findings import Finding
from evalkit.core.types import Item
from evalkit.lint.items import item_kind
from evalkit.lint.model import finding

ALPHA = 0.05
MIN_EXPECTED = 5.0


def chi_square(observed: Sequence[float], expected: Sequence[float]) -> tuple[float, float] | None:
    """(statistic, p) of Pearson's test, None when a cell expects fewer than MIN_EXPECTED or there is
    a single cell."""
    if len(observed) < 2 or min(expected) < MIN_EXPECTED:
        return None
    from scipy.stats import chisquare  # imported on use: scipy.stats is slow to import

    stat, p = chisquare(list(observed), list(expected))
    return float(stat), float(p)


def _positions(items: Sequence[Item]) -> tuple[dict[str, int], dict[str, float]]:
    """Observed golds per letter and the counts uniform placement expects."""
    observed: dict[str, int] = defaultdict(int)
    expected: dict[str, float] = defaultdict(float)
    for it in items:
        for letter in it.options:
            expected[letter] += 1 / len(it.options)
            observed.setdefault(letter, 0)
        observed[it.answer] += 1
    return dict(observed), dict(expected)


def _line(name: str, observed: dict[str, int], expected: dict[str, float], n: int) -> tuple[str, float | None]:
    letters = sorted(expected)
    shares = ", ".join(f"{k} {100 * observed[k] / n:.0f}%" for k in letters)
    test = chi_square([observed[k] for k in letters], [expected[k] for k in letters])
    if test is None:
        return f"gold positions {name}: {shares} (n={n}; too few for a chi-square test)", None
    stat, p = test
    return f"gold positions {name}: {shares} (n={n}); chi-square {stat:.1f}, p={p:.3g} against uniform", p


def _per_category(kind: str, items: Sequence[Item], line: Callable[[str, Sequence[Item]], tuple[str, float | None]],
                  against: str) -> list[Finding]:
    """The overall finding, then one per category whose own test rejects `against` at ALPHA."""
    by_cat: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_cat[it.category or "(none)"].append(it)
    out = []
    if len(by_cat) > 1:
        for cat, group in sorted(by_cat.items()):
            text, p = line(f"in {cat!r}", group)
            if p is not None and p < ALPHA:
                out.append(finding("info", kind, text))
    text, _ = line("overall", items)
    if len(by_cat) > 1:
        text += f"; {len(out)} of {len(by_cat)} categories differ from {against} at p < {ALPHA}"
    return [finding("info", kind, text), *out]


def answer_balance(bench: str, items: Sequence[Item]) -> list[Finding]:
    """Gold-position balance of the multiple-choice items, overall and per imbalanced category."""
    mcq = [it for it in items if item_kind(bench, it) == "mcq" and it.answer in it.options]
    if not mcq:
        return []
    return _per_category("answer-balance", mcq, lambda name, group: _line(name, *_positions(group), len(group)),
                         "uniform")


def yes_no_balance(bench: str, items: Sequence[Item]) -> list[Finding]:
    """Share of Yes among the yes/no golds, overall and per imbalanced category."""
    yn = [it for it in items if item_kind(bench, it) == "yesno" and it.answer in ("Yes", "No")]
    if not yn:
        return []

    def line(name: str, group: Sequence[Item]) -> tuple[str, float | None]:
        yes = sum(it.answer == "Yes" for it in group)
        n = len(group)
        test = chi_square([yes, n - yes], [n / 2, n / 2])
        head = f"Yes golds {name}: {yes} of {n} ({100 * yes / n:.1f}%)"
        if test is None:
            return head + "; too few for a chi-square test", None
        return head + f"; chi-square {test[0]:.1f}, p={test[1]:.3g} against 50%", test[1]

    return _per_category("yes-no-balance", yn, line, "50%")
