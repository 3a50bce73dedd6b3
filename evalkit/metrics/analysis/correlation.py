"""Score against model size, within model families (IF-Bench Table 3).

The paper correlates size with score inside each family and averages over families, so
a strong family does not pass for a size effect. A sizes file gives each model's family
and size (billions of parameters), as JSON {"model": {"family": ..., "size": ...}} or CSV
with columns model, family, size.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError

MIN_MODELS = 3  # two points always correlate perfectly


@dataclass(frozen=True)
class ModelSize:
    family: str
    size: float


def _size(where: str, value: Any) -> float:
    try:
        size = float(str(value).strip().rstrip("Bb"))
    except ValueError:
        raise EvalkitError(f"{where}: size must be a number of billions of parameters, not {value!r}") from None
    if size <= 0:
        raise EvalkitError(f"{where}: size must be positive, not {value!r}")
    return size


def load_sizes(path: Path) -> dict[str, ModelSize]:
    """model label -> (family, size); a bad row is an error naming the file and the row."""
    path = Path(path)
    if not path.exists():
        raise EvalkitError(f"{path}: sizes file not found")
    out: dict[str, ModelSize] = {}
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise EvalkitError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise EvalkitError(f"{path}: expected an object of model -> {{family, size}}")
        for model, entry in data.items():
            if not isinstance(entry, dict) or "family" not in entry or "size" not in entry:
                raise EvalkitError(f"{path}: model {model!r} needs 'family' and 'size'")
            out[model] = ModelSize(str(entry["family"]), _size(f"{path}: model {model!r}", entry["size"]))
        return out
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = {"model", "family", "size"} - set(reader.fieldnames or ())
        if missing:
            raise EvalkitError(f"{path}: missing column(s) {', '.join(sorted(missing))} (need model, family, size)")
        for row_no, row in enumerate(reader, start=2):
            out[row["model"].strip()] = ModelSize(row["family"].strip(), _size(f"{path}: row {row_no}", row["size"]))
    return out


def size_correlation(scores: Mapping[str, float], sizes: Mapping[str, ModelSize]) -> dict[str, Any]:
    """Pearson and Spearman per family (families with >= 3 sized models), and their means."""
    from scipy.stats import pearsonr, spearmanr

    families: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for model, score in scores.items():
        if model in sizes:
            families[sizes[model].family].append((sizes[model].size, score))
    per: dict[str, dict[str, Any]] = {}
    skipped: dict[str, int] = {}
    for family, points in sorted(families.items()):
        if len(points) < MIN_MODELS or len({s for s, _ in points}) < 2 or len({v for _, v in points}) < 2:
            skipped[family] = len(points)
            continue
        x, y = [p[0] for p in points], [p[1] for p in points]
        per[family] = {"n": len(points), "pearson": float(pearsonr(x, y)[0]), "spearman": float(spearmanr(x, y)[0])}
    mean = ({"pearson": sum(v["pearson"] for v in per.values()) / len(per),
             "spearman": sum(v["spearman"] for v in per.values()) / len(per)} if per else None)
    return {"per_family": per, "mean": mean, "skipped": skipped,
            "unsized": sorted(m for m in scores if m not in sizes)}
