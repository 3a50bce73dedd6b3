"""The command line and the docs as a newcomer reads them (issue 35 item 11).

(a) `--help` said nothing for `report`'s and `cache`'s flags, `compare --seed`, `sim --host/--port/--data/
    --images/--limit` (and a few positionals and `translate` flags): every argument of every command now
    has a help text.
(b) The README's Commands block left out `view`, `lint`, `derive`, `translate` (and `data`): it names
    every command now.
(c) README.md and docs/ named modules and tests that had moved (`evalkit/limits.py`, `evalkit/pricing.py`,
    `evalkit.editing`, `tests/test_empty_evaluation.py`): every path and module they name exists.
(d) docs/architecture.md gave `load(data, images, options)`, without the `sink` that `evalkit lint`
    passes: a benchmark written from it failed lint with a TypeError shown as "unreadable file". The
    documented methods now match `Benchmark`'s, and a `load` without `sink` is linted as its first fault.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import re
from typing import Any

from synthetic_data import REPO

from evalkit.benchmarks import REGISTRY, lenient
from evalkit.benchmarks.base import Benchmark
from evalkit.cli.parser import build_parser
from evalkit.core.errors import EvalkitError

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_MODULES = {"evalkit.lock"}  # a file name (the data lock), not a module


def _walk(parser: argparse.ArgumentParser, path: str, missing: set[str], commands: dict[str, Any]) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                commands[name] = sub
                if not (helps.get(name) or "").strip():
                    missing.add(f"{path} {name}")
                _walk(sub, f"{path} {name}", missing, commands)
        elif not isinstance(action, argparse._HelpAction) and not (action.help or "").strip():
            missing.add(f"{path} {'/'.join(action.option_strings) or action.dest}")


def test_every_argument_of_every_command_has_help():
    missing: set[str] = set()
    commands: dict[str, Any] = {}
    # sim's flags, and a benchmark's, are added only when the command line names them
    for argv in ([], ["sim"], *(["run", b] for b in REGISTRY), *(["sim", "--bench", b] for b in REGISTRY)):
        _walk(build_parser(argv), "evalkit", missing, commands)
    assert missing == set()
    assert {"report", "cache", "compare", "sim", "view", "lint", "derive", "translate", "data"} <= set(commands)


def test_readme_commands_block_names_every_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    named = {m.group(1) for m in re.finditer(r"^ {4}evalkit ([a-z]+)", block, re.M)}
    commands: dict[str, Any] = {}
    _walk(build_parser([]), "evalkit", set(), commands)
    assert named == set(commands)
    assert re.search(r"^ {4}evalkit cache [a-z|]*\bverify\b", block, re.M)


def _named(pattern: str) -> set[tuple[str, str]]:
    return {(doc.name, m.group(1)) for doc in DOCS for m in re.finditer(pattern, doc.read_text(encoding="utf-8"))}


def test_paths_and_modules_named_in_the_docs_exist():
    paths = _named(r"(?<![\w/.-])((?:evalkit|tests)/[\w/.-]+?\.py)\b")
    assert len(paths) > 20
    assert sorted((doc, p) for doc, p in paths if not (REPO / p).is_file()) == []
    modules = {(doc, m) for doc, m in _named(r"(?<![\w/.-])(evalkit(?:\.[A-Za-z_]\w*)+)") if m not in NOT_MODULES}
    assert sorted((doc, m) for doc, m in modules if not _resolves(m)) == []


def _resolves(dotted: str) -> bool:
    """A module, or an attribute of one (evalkit.build_view, evalkit.metrics.reliability.fit_histogram)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            obj: Any = importlib.import_module(name)
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


def test_the_documented_benchmark_methods_are_benchmarks_own():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Adding a benchmark", 1)[1].split("\n## ", 1)[0]
    documented = {m.group(1): m.group(2) for m in re.finditer(r"`(\w+)\(([^)`]*)\)", section)
                  if callable(getattr(Benchmark, m.group(1), None))}
    assert {"load", "expand", "parse", "aggregate"} <= set(documented)
    for name, params in documented.items():
        actual = list(inspect.signature(getattr(Benchmark, name)).parameters.values())[1:]  # without self
        given = [p.strip() for p in params.split(",") if p.strip()]
        assert [p.split("=")[0] for p in given] == [p.name for p in actual], name
        for doc, real in zip(given, actual, strict=True):
            if "=" in doc:  # a documented default is the real one (a name in benchmarks.lenient, or a literal)
                value = doc.split("=", 1)[1]
                assert real.default is getattr(lenient, value, object()) or repr(real.default) == value, name


class _NoSink(Benchmark):
    """A benchmark written from the old docs: `load` without `sink`."""

    name = "no-sink"

    def load(self, data, images, options):  # type: ignore[override]
        raise EvalkitError(f"{data}: line 3: no question")


def test_a_load_without_sink_is_linted_as_its_first_fault(tmp_path):
    loaded = _NoSink().load_lenient(tmp_path / "set.jsonl", None, {})
    assert loaded.items == []
    assert [(p.kind, p.message) for p in loaded.problems] == [("unreadable-file", "line 3: no question")]
