"""docs/failures.md is the table of the failure tests as they are (see tests/cli/failure_table.py)."""

from __future__ import annotations

from failure_table import DOC, render


def test_docs_failures_is_generated_from_the_tests():
    assert DOC.read_text(encoding="utf-8") == render(), "run `python tests/cli/failure_table.py` to rewrite it"
