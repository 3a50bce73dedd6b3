"""What the money tests share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    """A --prices file for openai/sim-model: $2 in, $8 out, $0.50 cached in, per million tokens."""
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai/sim-model": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}))
    return path
