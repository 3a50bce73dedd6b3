"""The installed package holds no test hook: nothing a variable in the user's environment can turn on
to make evalkit crash or misbehave. The batch tests used to kill a run through
`EVALKIT_TEST_DIE_AFTER_SUBMIT` (an `os._exit(137)` in evalkit/ask/batch/pool.py); they now inject
the kill from outside (tests/ask/test_batch_kill.py: code the child runs before the command patches the
journal's record of a created batch), and that test still shows a kill between creating a batch and recording it never
submits twice.
"""

from __future__ import annotations

import ast
from pathlib import Path

import evalkit

PACKAGE = Path(evalkit.__file__).parent


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_reads_a_test_variable():
    found = [f"{p.relative_to(PACKAGE)}: {node.value}" for p in _sources()
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and "EVALKIT_TEST" in node.value]
    assert found == []


def test_only_the_command_line_entry_point_ends_the_process_abruptly():
    calls = []
    for p in _sources():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_exit"
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "os"):
                    calls.append(f"{p.relative_to(PACKAGE).as_posix()}:{fn.name}")
    assert calls == ["cli/__init__.py:entry"]  # after main() has written and closed everything
