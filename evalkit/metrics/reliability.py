"""Reliability decomposition (TDBench paper §4.3, Appendix A): how much of accuracy is knowledge.

Model: each base problem is *known* with probability θ; each of its k variants (rotations,
circular shifts, languages) is then answered right independently with probability r when
known and g when guessed. So

    RE = θ r^k + (1-θ) g^k,   VE = θ r + (1-θ) g,   MA = θ (1-r)^k + (1-θ) (1-g)^k

Two estimators live here:

* `decompose(re, ve, ma, k)` (metrics/moments.py) is the paper's method: solve the three equations exactly on the
  ordered domain 0 <= g < VE < r <= 1 (which removes the (θ, r, g) <-> (1-θ, g, r) symmetry),
  or return None when there is no solution (the paper prints "-").
* `fit_histogram(hist)` is the maximum-likelihood fit of the same mixture to the whole
  histogram of correct counts 0..k (any k >= 3), with bootstrap confidence intervals. It uses
  all k+1 cells, never fails to return an answer, and works for any benchmark with variant
  groups (circular k=4, rotational k=4, circular x bilingual k=8).

A_adj = θ·r: single-pass accuracy with the lucky guesses taken out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy and scipy are imported where used: scipy takes seconds to import
    import numpy as np

from evalkit.metrics import fit_store
from evalkit.metrics.moments import decompose

# ---------------------------------------------------------------------------------------
# Maximum likelihood over the histogram of correct counts
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MixtureFit:
    """ML estimate with percentile bootstrap intervals (lo, hi) for each parameter."""

    theta: float
    r: float
    g: float
    a_adj: float
    k: int
    n: int
    log_likelihood: float
    ci: dict[str, tuple[float, float]]

    @property
    def guessed(self) -> bool:
        """Some group was guessed: fewer than half a group expected unknown leaves g undefined."""
        return (1.0 - self.theta) * self.n >= 0.5

    @property
    def separable(self) -> bool:
        """r and g differ: where they meet, known and guessed groups look alike and θ is arbitrary
        (the optimizer lands anywhere; two scipy releases gave 0.29 and 0.54 for one histogram)."""
        return abs(self.r - self.g) >= 1e-3

    def as_dict(self) -> dict[str, Any]:
        """The fit as summary.json keeps it; a parameter the data cannot identify is None ("—" in
        reports) with a note saying why, never a number that means nothing."""
        out: dict[str, Any] = {"theta": self.theta, "r": self.r, "g": self.g, "A_adj": self.a_adj,
                               "k": self.k, "n": self.n}
        for name, (lo, hi) in self.ci.items():
            out[f"{name}_ci"] = [lo, hi]
        undefined = []
        if not self.guessed:
            undefined, out["note"] = ["g"], "no question was guessed: g (the lucky-guess rate) is undefined"
        elif not self.separable:
            undefined = ["theta", "g", "A_adj"]
            out["note"] = "r = g: known and guessed questions look alike, so θ (and θ·r) is not identifiable"
        for name in undefined:
            out[name] = None
            if f"{name}_ci" in out:
                out[f"{name}_ci"] = None
        return out


def _pmf_table(k: int) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    c = np.arange(k + 1)
    return c, np.array([math.comb(k, int(x)) for x in c], dtype=float)


def _neg_loglik(params: np.ndarray, hist: np.ndarray, c: np.ndarray, comb: np.ndarray,
                k: int) -> tuple[float, np.ndarray]:
    """Negative log-likelihood of the histogram and its gradient in (θ, r, g)."""
    import numpy as np

    theta, r, g = params
    known = comb * r**c * (1 - r) ** (k - c)
    guess = comb * g**c * (1 - g) ** (k - c)
    p = np.clip(theta * known + (1 - theta) * guess, 1e-300, None)
    w = hist / p
    grad = np.array([
        (w * (known - guess)).sum(),
        (w * theta * known * (c / r - (k - c) / (1 - r))).sum(),
        (w * (1 - theta) * guess * (c / g - (k - c) / (1 - g))).sum(),
    ])
    return float(-(hist * np.log(p)).sum()), -grad


def _fit_once(hist: np.ndarray, starts: Sequence[tuple[float, float, float]]) -> tuple[np.ndarray, float]:
    """Best bounded L-BFGS-B fit over the starting points, ordered so that r >= g."""
    import numpy as np
    from scipy.optimize import minimize

    k = len(hist) - 1
    c, comb = _pmf_table(k)
    bounds = [(1e-9, 1 - 1e-9)] * 3
    best: tuple[np.ndarray, float] | None = None
    for start in starts:
        res = minimize(_neg_loglik, np.array(start, dtype=float), args=(hist, c, comb, k), method="L-BFGS-B", jac=True,
                       bounds=bounds, options={"ftol": 1e-14, "gtol": 1e-10, "maxiter": 500})
        if best is None or res.fun < best[1]:
            best = (res.x, float(res.fun))
    assert best is not None
    theta, r, g = best[0]
    if r < g:  # the mirror solution: same likelihood, the ordered one is reported
        theta, r, g = 1 - theta, g, r
    return np.array([theta, r, g]), best[1]


def _starts(hist: np.ndarray) -> list[tuple[float, float, float]]:
    """A moment-based start (the paper's solution when it exists) plus a small fixed grid."""
    import numpy as np

    k = len(hist) - 1
    n = hist.sum()
    starts = [(0.5, 0.9, 0.2), (0.3, 0.8, 0.3), (0.7, 0.95, 0.4), (0.5, 0.7, 0.1)]
    if n > 0:
        re, ma = hist[k] / n, hist[0] / n
        ve = float((hist * np.arange(k + 1)).sum() / (k * n))
        sol = decompose(float(re), ve, float(ma), k)
        if sol is not None:
            starts.insert(0, (min(max(sol.theta, 0.01), 0.99), min(sol.r, 0.999), max(sol.g, 0.001)))
    return starts


def fit_histogram(hist: Sequence[int] | np.ndarray, *, n_boot: int = 200, seed: int = 0,
                  level: float = 0.95) -> MixtureFit:
    """ML fit of the known/guess mixture to hist[c] = number of groups with c of k right.

    Confidence intervals: percentile bootstrap over groups (multinomial resampling of the
    histogram), seeded so a report is reproducible. n_boot = 0 skips them. The fit is a pure
    function of its arguments, so it is memoised: aggregate, report and compare ask for the same one,
    and a re-run finds it in the run directory (metrics/fit_store.py).
    """
    inputs = (tuple(int(x) for x in hist), n_boot, seed, level)
    store = fit_store.current()  # the run directory's kept fits (metrics/fit_store.py), when the engine opened them
    kept = _kept_fit(store.get(inputs)) if store is not None else None
    if kept is not None:
        return kept
    fit = _fit_memo(*inputs)
    if store is not None:
        store.put(inputs, dataclasses.asdict(fit))
    return fit


def _kept_fit(kept: dict[str, Any] | None) -> MixtureFit | None:
    """A kept fit's fields back as a MixtureFit; None when they are not a fit's (a damaged memo: refit)."""
    try:
        fit = MixtureFit(**{**kept, "ci": {str(name): (float(lo), float(hi)) for name, (lo, hi) in kept["ci"].items()}})
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    numbers = (fit.theta, fit.r, fit.g, fit.a_adj, fit.log_likelihood)
    return fit if all(isinstance(x, float) for x in numbers) and isinstance(fit.k, int) and isinstance(fit.n, int) \
        else None


@functools.lru_cache(maxsize=256)
def _fit_memo(hist: tuple[int, ...], n_boot: int, seed: int, level: float) -> MixtureFit:
    import numpy as np

    h = np.asarray(hist, dtype=float)
    k = len(h) - 1
    if k < 3:
        raise ValueError(f"the mixture needs k >= 3 variants per group to be identifiable (got k = {k})")
    n = int(h.sum())
    if n <= 0:
        raise ValueError("empty histogram")
    params, nll = _fit_once(h, _starts(h))
    ci: dict[str, tuple[float, float]] = {}
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(n, h / n, size=n_boot).astype(float)
        samples = []
        warm = [(float(params[0]), float(params[1]), float(params[2]))]
        fits: dict[tuple[float, ...], tuple[float, float, float, float]] = {}
        for d in draws:  # small samples draw the same histogram many times: fit each once
            key = tuple(d)
            if key not in fits:
                p, _ = _fit_once(d, warm)
                fits[key] = (p[0], p[1], p[2], p[0] * p[1])
            samples.append(fits[key])
        arr = np.array(samples)
        alpha = (1 - level) / 2
        for j, name in enumerate(("theta", "r", "g", "A_adj")):
            lo, hi = np.quantile(arr[:, j], [alpha, 1 - alpha])
            ci[name] = (float(lo), float(hi))
    theta, r, g = (float(x) for x in params)
    return MixtureFit(theta, r, g, theta * r, k, n, -nll, ci)


def histogram(correct_counts: Iterable[int], k: int) -> list[int]:
    """hist[c] = how many groups had c right, for c = 0..k."""
    hist = [0] * (k + 1)
    for c in correct_counts:
        if not 0 <= c <= k:
            raise ValueError(f"count {c} outside 0..{k}")
        hist[c] += 1
    return hist


def group_counts(records: Iterable[Any], key: Any = None) -> dict[Any, tuple[int, int]]:
    """group -> (right, variants) from records with .base_id and .correct (errors count as wrong)."""
    groups: dict[Any, list[bool]] = defaultdict(list)
    for rec in records:
        groups[key(rec) if key else rec.base_id].append(rec.correct is True)
    return {name: (sum(v), len(v)) for name, v in groups.items()}


def fit_groups(counts: Mapping[Any, tuple[int, int]], **kw: Any) -> MixtureFit | None:
    """ML fit over variant groups; groups of the most common size k are used (None if k < 3)."""
    if not counts:
        return None
    k = Counter(n for _, n in counts.values()).most_common(1)[0][0]
    if k < 3:
        return None
    return fit_histogram(histogram((c for c, n in counts.values() if n == k), k), **kw)


def consistency(counts: Mapping[Any, tuple[int, int]]) -> dict[str, float]:
    """RE (all right), VE (mean right) and MA (all wrong) over groups, as fractions."""
    if not counts:
        return {"RE": 0.0, "VE": 0.0, "MA": 0.0}
    n = len(counts)
    return {
        "RE": sum(1 for c, k in counts.values() if c == k) / n,
        "VE": sum(c / k for c, k in counts.values()) / n,
        "MA": sum(1 for c, _ in counts.values() if c == 0) / n,
    }


def reliability_summary(records: Sequence[Any], key: Any = None, *, n_boot: int = 200,
                        seed: int = 0) -> dict[str, Any] | None:
    """RE/VE/MA, the paper's solution and the ML fit for a benchmark's variant groups.

    Any benchmark whose queries share base_ids (circular, rotational, bilingual) can put
    this in its metrics; None when groups are smaller than 3 variants.
    """
    counts = group_counts(records, key)
    sizes = Counter(n for _, n in counts.values())
    if not sizes or sizes.most_common(1)[0][0] < 3:
        return None
    k = sizes.most_common(1)[0][0]
    full = {name: v for name, v in counts.items() if v[1] == k}
    stats = consistency(full)
    sol = decompose(stats["RE"], stats["VE"], stats["MA"], k)
    fit = fit_groups(full, n_boot=n_boot, seed=seed)
    return {
        "k": k, "groups": len(full), **stats,
        "paper": sol.as_dict() if sol else None,
        "paper_by_category": paper_by_category(records, k, key),
        "ml": fit.as_dict() if fit else None,
        "hist": histogram((c for c, _ in full.values()), k),
    }


def paper_by_category(records: Sequence[Any], k: int, key: Any = None) -> dict[str, Any] | None:
    """The paper's estimator (TDBench §4.3): the moment solution per category, then the mean over the
    categories that have one, with how many had none. None when records have no categories."""
    by_cat: dict[str, list[Any]] = defaultdict(list)
    for rec in records:
        if getattr(rec, "category", None):
            by_cat[rec.category].append(rec)
    if not by_cat:
        return None
    per: dict[str, dict[str, float] | None] = {}
    for cat, recs in sorted(by_cat.items()):
        full = {g: v for g, v in group_counts(recs, key).items() if v[1] == k}
        stats = consistency(full) if full else None
        sol = decompose(stats["RE"], stats["VE"], stats["MA"], k) if stats else None
        per[cat] = sol.as_dict() if sol else None
    mean, solved = _solved_mean(per)
    return {"per_category": per, "mean": mean, "solved": solved, "unsolved": len(per) - solved}


def binomial_hist_pmf(theta: float, r: float, g: float, k: int) -> np.ndarray:
    """Expected share of groups with c = 0..k right under the mixture (for plots and tests)."""
    import numpy as np
    from scipy.stats import binom

    c = np.arange(k + 1)
    return theta * binom.pmf(c, k, r) + (1 - theta) * binom.pmf(c, k, g)


def category_table(stats: Mapping[str, Mapping[str, float]], k: int = 4) -> dict[str, Any]:
    """The paper's tables: per-category solutions, then means over the solvable ones.

    stats: category -> {"RE", "VE", "MA"}. Returns {"per_category": {cat: dict | None},
    "mean": {theta, r, g, A_adj} over solvable categories (None if none), "n_solved",
    "n_unsolvable"}.
    """
    per: dict[str, dict[str, float] | None] = {}
    for cat, s in stats.items():
        sol = decompose(s["RE"], s["VE"], s["MA"], k)
        per[cat] = sol.as_dict() if sol else None
    mean, solved = _solved_mean(per)
    return {"per_category": per, "mean": mean, "n_solved": solved, "n_unsolvable": len(per) - solved}


def _solved_mean(per: Mapping[str, Mapping[str, float] | None]) -> tuple[dict[str, float] | None, int]:
    """Each parameter's mean over the categories the paper's method solved, and how many it solved."""
    solved = [v for v in per.values() if v is not None]
    mean = ({name: sum(v[name] for v in solved) / len(solved) for name in ("theta", "r", "g", "A_adj")}
            if solved else None)
    return mean, len(solved)
