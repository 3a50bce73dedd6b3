"""The export tests' one finished run (tests/export/export_run.py), made once per test worker: every export
reads it and writes elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from export_run import make_export_run


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_export_run(tmp_path_factory.mktemp("export"))
