"""The commands are one table (evalkit/cli/table.py): a new command is one module and one line.

Every line's two functions resolve; the parser offers exactly the table's commands, in its order; building
the parser (what `evalkit --help` does) imports no command's work; and a command added by one line (here a
function of this module, patched into the table) is parsed, run and given its exit code like the others.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from evalkit.cli import build_parser, main
from evalkit.cli.table import COMMANDS, Command
from evalkit.core.sdk import load_target


def test_every_line_resolves_to_two_functions() -> None:
    for name, command in COMMANDS.items():
        for target in command:
            assert ":" in target, f"{name}: {target!r} is not 'module:function'"
            assert callable(load_target(target)), f"{name}: {target} is not a function"


def test_the_parser_offers_the_table_in_its_order() -> None:
    sub = next(a for a in build_parser([])._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(COMMANDS)


_PROBE = """
import json, sys
from evalkit.cli import build_parser
build_parser([])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("evalkit"))))
"""


def test_building_the_parser_imports_no_commands_work() -> None:
    """Only the `flags` halves are imported for `--help`; a `run` half in a module of its own is not."""
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True)
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    flags_modules = {c.flags.partition(":")[0] for c in COMMANDS.values()}
    for name, command in COMMANDS.items():
        module = command.run.partition(":")[0]
        if module not in flags_modules:
            assert module not in loaded, f"`evalkit --help` imported {module} ({name}'s work)"


def _add_hello(sub: Any) -> None:
    p = sub.add_parser("hello", help="say hello")
    p.add_argument("--who", default="world")


def _run_hello(args: argparse.Namespace, console: Any) -> int:
    console.print(f"hello {args.who}", markup=False, highlight=False)
    return 3


def test_a_new_command_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(COMMANDS, "hello", Command(f"{__name__}:_add_hello", f"{__name__}:_run_hello"))
    assert main(["hello", "--who", "table"]) == 3
    assert "hello table" in capsys.readouterr().out
    assert main(["hello", "--nope"]) == 2
    assert "evalkit: error: unrecognized arguments: --nope" in capsys.readouterr().err
