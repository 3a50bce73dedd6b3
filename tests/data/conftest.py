"""The Hub stand-in as the data tests' Hub: huggingface_hub pointed at it, in a folder of the test's own."""

from __future__ import annotations

import pytest
from hub_standin import HubStandin


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with HubStandin() as standin:
        standin.activate(monkeypatch, tmp_path / "hf")
        monkeypatch.chdir(tmp_path)  # no evalkit.lock of the developer's
        yield standin
