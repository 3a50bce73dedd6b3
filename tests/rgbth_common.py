"""What the RGB-Th-Bench test files share: the sample release bundled with evalkit, and the side real photos
are sent at (keeps the runs quick; the answer key's fingerprints survive the resize)."""

from __future__ import annotations

from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "rgb-th-bench"
MAX_SIDE = 256
