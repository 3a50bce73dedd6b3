"""What the docs name exists (issue 43, acceptance): paths, the architecture map's rows, and module paths.

(a) Every `evalkit/…` and `tests/…` path README.md and docs/*.md name is a file or folder of this checkout.
    A `<placeholder>` segment (`evalkit/providers/<family>/`, `evalkit/export/to_<target>.py`) stands for
    any name: the pattern must match at least one path.
(b) Each row of docs/architecture.md's "To change X, open Y" table names files, and every path it names
    exists (evalkit/, tests/, docs/, prompts/, datasets/, bench/); the table covers the changes the issue
    lists; every folder of the package has its paragraph on the map.
(c) Every dotted module path README.md, docs/*.md (docs/python.md and docs/export.md among them) and
    DESIGN.md's contract name still imports: `a.b.c` is a module, or an attribute of the module `a.b`.
    DESIGN.md sits beside the repository (../shared/DESIGN.md); a checkout without it skips that file.

Everything is extracted from the files by pattern, so a new mention in the docs is checked without editing
this test.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest


def _repo() -> Path:
    """The checkout's root (the folder holding pyproject.toml), wherever under tests/ this file sits."""
    here = Path(__file__).resolve().parent
    return next(p for p in (here, *here.parents) if (p / "pyproject.toml").is_file() and (p / "evalkit").is_dir())


REPO = _repo()
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
ARCHITECTURE = REPO / "docs" / "architecture.md"
DESIGN = REPO.parent / "shared" / "DESIGN.md"

PATH = re.compile(r"(?<![\w/.<>-])((?:evalkit|tests)/[\w/.<>-]*)")
PLACEHOLDER = re.compile(r"<[^<>/]+>")
DOTTED = re.compile(r"(?<![\w/.-])(evalkit(?:\.[A-Za-z_]\w*)+)")
FROM_IMPORT = re.compile(r"\bfrom[ \t]+(evalkit(?:\.\w+)*)[ \t]+import[ \t]+([\w \t,]+)")
NOT_MODULES = {"evalkit.lock"}  # a file name (the data lock, ./evalkit.lock), not a module
# The module paths the issue's acceptance names: the extraction must find them (a broken pattern finds none).
ACCEPTANCE_MODULES = {"evalkit.metrics.reliability", "evalkit.ask.editing", "evalkit.export.export",
                      "evalkit.lint.lint_for_run", "evalkit.run"}


def _rel(doc: Path) -> str:
    return doc.relative_to(REPO).as_posix() if doc.is_relative_to(REPO) else str(doc)


def _exists(path: str) -> bool:
    """A file or folder of the checkout; with `<placeholders>`, at least one path matching the pattern."""
    folder = path.endswith("/")
    if PLACEHOLDER.search(path):
        pattern = PLACEHOLDER.sub("*", path.rstrip("/"))
        return any(p.is_dir() or not folder for p in REPO.glob(pattern))
    target = REPO / path
    return target.is_dir() if folder else target.exists()


def _paths_in(text: str) -> list[tuple[int, str]]:
    """(line, path) for every evalkit/… and tests/… path, trailing punctuation dropped."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            path = m.group(1).rstrip(".,:;")
            if "<" in path and not PLACEHOLDER.search(path):  # a stray "<": not a placeholder we can read
                path = path.split("<", 1)[0]
            found.append((number, path))
    return found


def test_paths_named_in_the_docs_exist() -> None:
    named = [(f"{_rel(doc)}:{line}", path) for doc in DOCS for line, path in _paths_in(doc.read_text("utf-8"))]
    assert len(named) > 50, "the pattern finds almost no path: is it broken?"
    missing = [(where, path) for where, path in named if not _exists(path)]
    moved_tests = [m for m in missing if m[1].startswith("tests/")]
    hint = ("\n(tests/ paths: a test file that moved needs its new path in the doc)" if moved_tests else "")
    assert missing == [], "paths the docs name that are not in the checkout:\n" + "\n".join(
        f"  {where}: {path}" for where, path in missing) + hint


def test_placeholders_stand_for_existing_names() -> None:
    assert _exists("evalkit/providers/<family>/")
    assert _exists("evalkit/export/to_<target>.py")
    assert not _exists("evalkit/providers/<family>/no_such_module.py")
    assert not _exists("evalkit/no_such_folder/")


# ---------------------------------------------------------------- the map's table

TOP = ("evalkit", "tests", "docs", "prompts", "datasets", "bench")
TABLE_PATH = re.compile(rf"^(?:{'|'.join(TOP)})/[\w/.<>-]*$")
# What the table must cover (issue 43, item 9), each as words a row's first cell holds.
TOPICS = ("new provider", "OpenAI-shaped service", "new benchmark", "simulator dialect", "budget", "Redis",
          "shards and merge", "matrix and its display", "data registry", "export target", "new command")


def _table_rows() -> list[tuple[str, list[str]]]:
    text = ARCHITECTURE.read_text("utf-8")
    match = re.search(r"^## To change X, open Y\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "docs/architecture.md has no '## To change X, open Y' section"
    rows = []
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 2 or set(cells[0]) <= set("-: ") or cells[0] == "to change":
            continue
        paths = [t.rstrip(".,:;") for t in re.findall(r"`([^`]+)`", cells[1]) if TABLE_PATH.match(t)]
        rows.append((cells[0], paths))
    return rows


def test_each_row_of_the_map_names_files_that_exist() -> None:
    rows = _table_rows()
    assert rows, "the table has no rows"
    for change, paths in rows:
        assert any(p.startswith("evalkit/") for p in paths), f"row {change!r} names no file of the package"
        missing = [p for p in paths if not _exists(p)]
        assert missing == [], f"row {change!r} names paths that are not in the checkout: {missing}"


def test_the_map_covers_the_changes_the_issue_lists() -> None:
    changes = " ".join(change for change, _ in _table_rows()).lower()
    assert [t for t in TOPICS if t.lower() not in changes] == []


def test_every_folder_of_the_package_is_on_the_map() -> None:
    text = ARCHITECTURE.read_text("utf-8")
    folders = sorted(p.parent.relative_to(REPO).as_posix() + "/" for p in (REPO / "evalkit").rglob("__init__.py"))
    assert [f for f in folders if f"`{f}`" not in text] == []


# ---------------------------------------------------------------- module paths

def _contract(text: str) -> str:
    """DESIGN.md's contract section (the rest of the brief names suggestions, not promises)."""
    match = re.search(r"^## Contract\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else text


def _modules_in(text: str) -> set[str]:
    names = {m.group(1) for m in DOTTED.finditer(text)}
    for m in FROM_IMPORT.finditer(text):
        names.update(f"{m.group(1)}.{n.strip()}" for n in m.group(2).split(",") if n.strip().isidentifier())
    return names - NOT_MODULES


def _resolves(dotted: str) -> bool:
    """`a.b.c` is a module, or an attribute of the module `a.b` (evalkit.run, evalkit.lint.lint_for_run)."""
    try:
        importlib.import_module(dotted)
        return True
    except ModuleNotFoundError as e:
        if e.name != dotted and not dotted.startswith(f"{e.name}."):
            raise  # the module is there but something it imports is not: a failure to see, not a wrong name
    parent, _, attr = dotted.rpartition(".")
    try:
        module = importlib.import_module(parent)
    except ModuleNotFoundError:
        return False
    return hasattr(module, attr)


MODULE_DOCS = [*DOCS, DESIGN]


@pytest.mark.parametrize("doc", MODULE_DOCS, ids=[_rel(d) if d != DESIGN else "DESIGN.md" for d in MODULE_DOCS])
def test_module_paths_named_in_the_docs_import(doc: Path) -> None:
    if not doc.is_file():
        pytest.skip(f"{doc} is not in this checkout (DESIGN.md sits beside the repository, in ../shared)")
    text = doc.read_text("utf-8")
    names = _modules_in(_contract(text) if doc == DESIGN else text)
    if doc == DESIGN:
        assert "evalkit.run" in names and "evalkit.metrics.reliability.decompose" in names, names
    assert sorted(n for n in names if not _resolves(n)) == [], f"{_rel(doc)} names modules that do not import"


def test_the_extraction_finds_the_acceptance_modules() -> None:
    found = set().union(*(_modules_in(d.read_text("utf-8")) for d in DOCS))
    assert found >= ACCEPTANCE_MODULES, ACCEPTANCE_MODULES - found
    assert {"evalkit.export", "evalkit.compare"} <= found
