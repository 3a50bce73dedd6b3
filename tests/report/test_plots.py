"""Report charts: every PNG is big enough, not blank, deterministic, and matplotlib stays out of imports."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from evalkit.benchmarks import get_benchmark
from evalkit.core.record import Record
from evalkit.metrics.analysis import views
from evalkit.metrics.analysis.result import ModelResult, analyze
from evalkit.report import figures, plots
from evalkit.report.plots_common import CHANCE_KEY

MODELS = [
    "openai/gpt-4o-2024-08-06",
    "anthropic/claude-3-5-sonnet-20241022",
    "google/gemini-1.5-pro",
    "openai/gpt-4o-mini",
    "qwen/qwen2-vl-72b-instruct",
    "meta/llama-3.2-90b-vision",
    "mistral/pixtral-large",
    "sim/random-baseline",
]
SKILLS = [
    "Temperature to Color Mapping Understanding", "Object Counting", "Thermal Scene Description",
    "Hot Object Localization in Cluttered Indoor Scenes", "Relative Temperature Comparison", "Text Reading",
    "Human Presence Detection", "Material Recognition", "Spatial Relations", "Heat Source Identification",
    "Weather Condition Inference", "Vehicle Engine State", "Animal Detection at Night",
    "Temperature Estimation", "Cross-Modal Alignment", "Anomaly Detection in Equipment",
]
VARIANTS = ["rot=0", "rot=90", "rot=180", "rot=270", "shift=1", "lang=cn"]
LETTERS = list("ABCDE")


def table(n_rows: int, n_cols: int, scale: float = 100.0, seed: int = 0) -> list[list[float | None]]:
    """Deterministic pseudo-scores in [0.1, 0.9]*scale with a sprinkling of None."""
    return [[None if (i + j + seed) % 11 == 4 else round(scale * (0.1 + 0.8 * ((i * 7 + j * 3 + seed) % 17) / 16), 2)
             for j in range(n_cols)] for i in range(n_rows)]


def shifted(rows: list[list[float | None]], delta: float) -> list[list[float | None]]:
    return [[None if v is None or (i + j) % 5 == 0 else v + delta for j, v in enumerate(r)] for i, r in enumerate(rows)]


def headline(path: Path, models: list[str]) -> Path:
    values = [55.0 + 3.5 * i for i in range(len(models))]
    lo = [None if i == 2 else v - 4.2 for i, v in enumerate(values)]
    hi = [None if i == 2 else v + 3.8 for i, v in enumerate(values)]
    return plots.headline_bars(path, "accuracy (%)", models, values, lo, hi, title="Overall accuracy")


def heatmap(path: Path, models: list[str]) -> Path:
    return plots.skill_heatmap(path, models, SKILLS, table(len(models), len(SKILLS)), title="Per-skill accuracy")


def dimensions(path: Path, models: list[str]) -> Path:
    values = table(len(models), len(SKILLS), seed=3)
    return plots.dimension_bars(path, models, SKILLS, values, shifted(values, -6.0), shifted(values, 5.5),
                                title="Accuracy per dimension")


def confusion(path: Path, models: list[str]) -> Path:
    mats = [[[0 if g == c else (g * 3 + c * 5 + m) % 9 for c in range(5)] for g in range(5)]
            for m in range(len(models))]
    return plots.confusion_grid(path, models, LETTERS, mats, title="Wrong answers by letter")


def e_rate(path: Path, models: list[str]) -> Path:
    return plots.e_rate_bars(path, models, [4.0 + 3.1 * i for i in range(len(models))], 12.5,
                             title="How often models answer E")


def reliability(path: Path, models: list[str]) -> Path:
    n = len(models)
    theta: list[float | None] = [0.45 + 0.05 * i for i in range(n)]
    theta[-1] = None
    a_adj = [None if t is None else t * 0.9 for t in theta]
    return plots.reliability_bars(path, models, theta, [0.9] * n, [0.25 + 0.01 * i for i in range(n)], a_adj,
                                  title="Reliability decomposition")


def variants(path: Path, models: list[str]) -> Path:
    return plots.variant_accuracy(path, models, VARIANTS, table(len(models), len(VARIANTS), seed=5),
                                  title="Accuracy per variant")


CHARTS: dict[str, Callable[[Path, list[str]], Path]] = {
    "headline": headline, "heatmap": heatmap, "dimensions": dimensions, "confusion": confusion,
    "e_rate": e_rate, "reliability": reliability, "variants": variants,
}


def assert_real_png(path: Path) -> tuple[int, int]:
    assert path.is_file()
    with Image.open(path) as img:
        assert img.format == "PNG"
        width, height = img.size
        pixels = np.asarray(img.convert("RGB"))
    assert width >= 600 and height >= 400, (width, height)
    assert pixels.std() > 5
    packed = (pixels[..., 0].astype(np.int32) << 16) | (pixels[..., 1].astype(np.int32) << 8) | pixels[..., 2]
    _, counts = np.unique(packed, return_counts=True)
    assert 1 - counts.max() / packed.size > 0.01, "almost every pixel has the background colour"
    return width, height


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, int], Path]:
    """Draw each (chart, number of models) once per module; later tests reuse the PNG."""
    root, done = tmp_path_factory.mktemp("charts"), {}

    def draw(chart: str, n_models: int) -> Path:
        if (chart, n_models) not in done:
            target = root / f"n{n_models}" / "nested" / f"{chart}.png"
            assert CHARTS[chart](target, MODELS[:n_models]) == target
            done[chart, n_models] = target
        return done[chart, n_models]

    return draw


@pytest.mark.parametrize("n_models", [1, 8])
@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_chart_is_a_real_png(drawn: Callable[[str, int], Path], chart: str, n_models: int) -> None:
    from matplotlib import pyplot as plt

    assert_real_png(drawn(chart, n_models))
    assert plt.get_fignums() == []  # every figure is closed


@pytest.mark.parametrize("chart", ["heatmap", "dimensions", "confusion", "e_rate", "reliability"])
def test_charts_grow_with_the_number_of_models(drawn: Callable[[str, int], Path], chart: str) -> None:
    with Image.open(drawn(chart, 1)) as one, Image.open(drawn(chart, 8)) as eight:
        assert eight.width * eight.height > one.width * one.height


def test_output_is_deterministic(tmp_path: Path) -> None:
    a = variants(tmp_path / "a.png", MODELS[:2]).read_bytes()
    b = variants(tmp_path / "b.png", MODELS[:2]).read_bytes()
    assert a == b


def test_all_missing_values_still_draw(tmp_path: Path) -> None:
    none4: list[float | None] = [None, None]
    out = plots.reliability_bars(tmp_path / "r.png", MODELS[:2], none4, [0.8, 0.7], none4, none4)
    assert_real_png(out)
    grid = [[None] * 4, [None] * 4]
    assert_real_png(plots.skill_heatmap(tmp_path / "h.png", MODELS[:2], SKILLS[:4], grid, vmax=1.0))
    assert_real_png(plots.headline_bars(tmp_path / "b.png", "RE", MODELS[:2], [0.5, 0.7], [None, None],
                                        [None, None], title=None))


def test_mismatched_lengths_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="values"):
        plots.headline_bars(tmp_path / "x.png", "acc", MODELS[:2], [1.0], [None], [None])
    with pytest.raises(ValueError, match=r"values\[0\]"):
        plots.variant_accuracy(tmp_path / "x.png", MODELS[:1], VARIANTS, [[50.0]])
    assert not (tmp_path / "x.png").exists()


def test_importing_plots_does_not_import_matplotlib() -> None:
    code = "import evalkit.report.plots, sys; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ------------------------------------------------------------------ what the figures show (issue 15)


def _rec(qid: str, ok: bool, *, gold: str = "A", parsed: str | None = None, base: str | None = None,
         category: str = "c", variant: dict | None = None, error: str | None = None) -> Record:
    chosen = gold if ok else parsed
    return Record(query_id=qid, item_id=base or qid, base_id=base or qid, variant=variant or {}, model="m",
                  request_key="k" + qid, response=None if error else f"Answer: {chosen}", gold=gold,
                  parsed=None if error else chosen, parse_method="rule", correct=ok and not error,
                  category=category, error=error)


def _mcq_records(n_items: int = 40, shifts: int = 1) -> list[Record]:
    """Items right at every shift (i % 3 != 0) or at none, wrong answers the next letter."""
    return [_rec(f"{i}|{s}", i % 3 != 0, gold="ABCD"[(i + s) % 4], parsed="ABCD"[(i + s + 1) % 4], base=str(i),
                 category=f"cat{i % 2}", variant={"shift": s} if shifts > 1 else None)
            for i in range(n_items) for s in range(shifts)]


def _analysed(label: str, records: list[Record], chance: float | None = 25.0, **options: object) -> ModelResult:
    return analyze(label, get_benchmark("mcq"), records, dict(options), n_boot=200, category_boot=200,
                   chance=chance)


def _chance_labels(path: Path) -> list[str]:
    with Image.open(path) as img:
        return [line["label"] for line in json.loads(img.info.get(CHANCE_KEY, "[]"))]


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Each saved figure's axes limits, tick labels and title, by file name."""
    seen: dict[str, Any] = {}
    real = plots._save

    def capture(fig, path, title):  # noqa: ANN001, ANN202 - plots._save's own signature
        seen[Path(path).name] = {"ylim": [ax.get_ylim() for ax in fig.axes], "xlim": [ax.get_xlim() for ax in fig.axes],
                                 "xticks": [[t.get_text() for t in ax.get_xticklabels()] for ax in fig.axes],
                                 "yticks": [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes],
                                 "title": title}
        return real(fig, path, title)

    monkeypatch.setattr(plots, "_save", capture)
    return seen


def test_chance_comes_from_the_summary_and_is_drawn_on_every_accuracy_axis(tmp_path: Path) -> None:
    records = _mcq_records(shifts=4)
    a, b = _analysed("a", records), _analysed("b", records[:100])
    assert a.chance == 25.0 and a.to_dict()["chance_pct"] == 25.0
    assert _analysed("plain", _mcq_records()).headline_chance == pytest.approx(25.0)  # accuracy: per answer
    drawn = {p.name: p for _, p in figures.draw_all(tmp_path, [a, b], skip_unchanged=False)}
    for name in ("skills_heatmap.png", "categories.png", "variants.png"):
        assert _chance_labels(drawn[name]) == ["chance 25%"], name
    assert _chance_labels(drawn["headline.png"]) == ["chance 0.391%"]  # circular accuracy: all 4 shifts right
    assert _chance_labels(drawn["reliability.png"]) == ["chance 0.25"]  # θ, r, g are fractions
    assert _chance_labels(drawn["confusion.png"]) == []


def test_models_of_different_chance_get_one_labelled_line_each(tmp_path: Path) -> None:
    records = _mcq_records()
    results = [_analysed("four", records), _analysed("five", records, chance=20.0),
               _analysed("four-too", records), _analysed("unknown", records, chance=None)]
    drawn = {p.name: p for _, p in figures.draw_all(tmp_path, results, skip_unchanged=False)}
    assert _chance_labels(drawn["categories.png"]) == ["chance 20%: five", "chance 25%: four, four-too"]


def test_all_variants_right_headline_has_its_own_chance() -> None:
    """circular_accuracy needs every shift right: at random that is 0.25^4, not 25%."""
    m = _analysed("m", _mcq_records(shifts=4), circular=True)
    assert m.metric == "circular_accuracy" and not m.per_answer_headline
    assert m.headline_chance == pytest.approx(100 * 0.25 ** 4)
    assert _analysed("m", _mcq_records(shifts=4), chance=None).headline_chance is None


def test_single_model_draws_category_bars_with_its_headline_not_a_one_bar_chart(tmp_path: Path,
                                                                                captured: dict[str, Any]) -> None:
    m = _analysed("solo", _mcq_records())
    planned = figures.plan_figures(tmp_path, [m])
    names = [f.path.name for f in planned]
    assert "headline.png" not in names and "skills_heatmap.png" not in names and "categories.png" in names
    cat = next(f for f in planned if f.path.name == "categories.png")
    assert m.ci is not None and f"overall accuracy {m.ci.estimate:.1f}% (95% CI" in cat.title
    cat.draw()
    assert captured["categories.png"]["title"].startswith(f"solo: accuracy {m.ci.estimate:.1f}%")
    with Image.open(cat.path) as img:
        assert img.width >= 600


def test_confusion_is_over_the_option_letters_with_one_other_column(tmp_path: Path,
                                                                    captured: dict[str, Any]) -> None:
    """IF-Bench's extractor writes F for "no option" after A-D: not a letter of the benchmark."""
    records = [_rec(f"{i}|{s}", False, gold="ABCD"[(i + s) % 4], parsed="F" if i % 4 == 0 else "ABCD"[(i + s + 1) % 4],
                    base=str(i), variant={"shift": s}) for i in range(8) for s in range(4)]
    records.append(_rec("unread", False, gold="B", parsed=None))
    records.append(_rec("failed", False, gold="C", error="timeout"))
    conf = views.confusion(records)
    assert conf is not None and conf.letters == ["A", "B", "C", "D"]
    assert conf.other == [2, 3, 2, 2]  # F per gold letter, plus the unread answer (gold B); not the failure
    assert sum(map(sum, conf.wrong)) == 24
    figures.plan_figures(tmp_path, [_analysed("m", records)])[-2].draw()  # confusion, before reliability
    shot = captured["confusion.png"]
    assert shot["xticks"][0] == ["A", "B", "C", "D", plots.OTHER_COLUMN]
    assert shot["yticks"][0] == ["A", "B", "C", "D"]


def test_option_letters_keep_a_chosen_e_that_is_never_gold() -> None:
    records = [_rec(str(i), i % 2 == 0, gold="ABCD"[i % 4], parsed="E") for i in range(8)]
    assert views.option_letters(records) == list("ABCDE")
    assert views.option_letters([_rec("1", False, gold="D", parsed="F")]) == list("ABCD")
    assert views.confusion([_rec("1", False, gold="yes", parsed="no")]) is None


def test_category_intervals_resample_an_items_variants_together() -> None:
    """40 items x 4 shifts that agree within each item carry the evidence of 40 answers, not 160."""
    clustered = views.per_category(_mcq_records(shifts=4), n_boot=2000)["cat0"]
    independent = views.per_category(_mcq_records(shifts=1), n_boot=2000)["cat0"]
    wilson_160 = views.Rate(clustered.k, clustered.n)
    assert clustered.n == 80 and independent.n == 20 and clustered.pct == pytest.approx(independent.pct)
    assert clustered.lo is not None and independent.lo is None  # one answer per item: Wilson's interval
    width = clustered.ci[1] - clustered.ci[0]
    assert width > 1.6 * (wilson_160.ci[1] - wilson_160.ci[0])
    assert width == pytest.approx(independent.ci[1] - independent.ci[0], abs=6.0)
    assert clustered.ci[0] < clustered.pct < clustered.ci[1]
    plain = views.per_category(_mcq_records(), n_boot=0)["cat0"]
    assert plain.ci == views.Rate(plain.k, plain.n).ci and plain.lo is None  # no resampling: Wilson


def test_a_run_with_no_answers_draws_no_plot(tmp_path: Path) -> None:
    failed = _analysed("failed", [_rec(str(i), False, error="auth", category="c") for i in range(10)])
    assert failed.answered == 0
    assert figures.plan_figures(tmp_path, [failed]) == []
    assert figures.draw_all(tmp_path, [failed]) == [] and not list(tmp_path.glob("*.png"))
    assert figures.unplotted([failed]) == ["failed: no plots, nothing was answered"]
    ok = _analysed("ok", _mcq_records())
    planned = figures.plan_figures(tmp_path, [ok, failed])
    assert planned and all("(failed: nothing answered, not shown)" in f.title for f in planned)


def test_percentages_are_drawn_on_0_100_axes(tmp_path: Path, captured: dict[str, Any]) -> None:
    """Even when every value is 0 or missing (a failed run's categories once got a 0-1 axis)."""
    zeros: list[list[float | None]] = [[0.0, None], [None, None]]
    plots.dimension_bars(tmp_path / "d.png", MODELS[:2], ["x", "y"], zeros, zeros, zeros)
    plots.variant_accuracy(tmp_path / "v.png", MODELS[:2], ["rot=0", "rot=90"], zeros)
    plots.e_rate_bars(tmp_path / "e.png", MODELS[:2], [0.0, 0.0], 0.0)
    plots.headline_bars(tmp_path / "h.png", "accuracy (%)", MODELS[:2], [0.0, 0.0], [None, None], [None, None])
    plots.headline_bars(tmp_path / "re.png", "RE", MODELS[:2], [0.2, 0.3], [None, None], [None, None], scale=1.0)
    for name in ("d.png", "v.png", "e.png"):
        assert captured[name]["ylim"][0] == (0.0, 100.0), name
    assert captured["h.png"]["xlim"][0] == (0.0, 100.0)
    assert captured["re.png"]["xlim"][0] == (0.0, 1.0)
