"""Report charts: every PNG is big enough, not blank, deterministic, and matplotlib stays out of imports."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evalkit.report import plots

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
