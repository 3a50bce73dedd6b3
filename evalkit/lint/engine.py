"""The lint engine: read a benchmark's data leniently, run every check, keep the full result.

`check_items` is the whole set of checks over items (pure but for the image files it reads);
`cheap=True` is the subset a run does at its start: text, options, gold, duplicates, protocol
checks, image file existence and size, no decoding and no statistics. `lint_data` is what
`evalkit lint` does: the benchmark's own lenient loader (so it checks exactly what a run would
ask), its problems as findings, every check, paths made relative to the data folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalkit.benchmarks.lenient import LoadProblem
from evalkit.core.findings import Finding
from evalkit.core.types import Item
from evalkit.lint import balance, content, images, protocol
from evalkit.lint.items import item_kind, views
from evalkit.lint.model import LintReport, finding, ordered

SHARED_IMAGES_UNEXPECTED = ("mcq", "tdbench")  # formats where one picture per question is the rule


def problem_findings(problems: Iterable[LoadProblem]) -> list[Finding]:
    """What the lenient loader could not read: errors (a run would stop there)."""
    out = []
    for p in problems:
        kind = p.kind if p.kind in ("unreadable-file", "unreadable-row", "duplicate-id", "rotation-mismatch") \
            else "unreadable-row"
        out.append(finding("error", kind, p.message, file=p.file, items=p.items, where=p.where or p.row))
    return out


def check_items(bench: str, items: Sequence[Item], *, cheap: bool = False) -> tuple[list[Finding], int]:
    """(findings, number of distinct images) of every check over `items` (see the module docstring)."""
    out: list[Finding] = []
    generic_dups = bench not in protocol.OWN_DUPLICATE_OPTIONS
    for it in items:
        kind = item_kind(bench, it)
        for view in views(it):
            out += content.view_findings(view, kind, duplicate_options=generic_dups)
    out += content.option_count_findings(bench, items, protocol.EXPECTED_OPTIONS)
    out += content.duplicate_questions(bench, items, per_category=bench in protocol.DUPLICATES_PER_CATEGORY)
    out += protocol.protocol_findings(bench, items)
    uses = images.collect(items)
    missing, sizes = images.file_findings(uses)
    out += missing + images.size_outliers(uses, sizes)
    if not cheap:
        broken, prints = images.decode_findings(uses, sizes)
        out += broken + images.near_duplicates(uses, prints)
        if bench in SHARED_IMAGES_UNEXPECTED:
            out += images.shared_images(uses, items)
        out += balance.answer_balance(bench, items) + balance.yes_no_balance(bench, items)
    return out, len(uses)


def relative(findings: Iterable[Finding], root: Path) -> list[Finding]:
    """File names relative to the data folder where they are inside it (shorter, and stable when the
    data moves)."""
    base = os.path.realpath(root)
    prefixes = tuple(dict.fromkeys(p.rstrip(os.sep) + os.sep for p in (str(root), base)))
    out = []
    for f in findings:
        if f.file and os.path.isabs(f.file):
            real = os.path.realpath(f.file)
            if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
                f = replace(f, file=Path(os.path.relpath(real, base)).as_posix())
        if any(p in f.message for p in prefixes):  # paths inside messages too (near-duplicates name two)
            message = f.message
            for p in prefixes:
                message = message.replace(p, "")
            f = replace(f, message=message)
        out.append(f)
    return out


def data_root(data: Path) -> Path:
    return data if data.is_dir() else data.parent


def lint_data(bench_name: str, data: str | Path | None, image_dir: str | Path | None, *,
              options: dict[str, Any] | None = None, cache_dir: Path | None = None) -> tuple[LintReport, str | None]:
    """(the full lint of a data set, when a reused result was made or None). Bad input (unknown
    benchmark, no such data or --images folder) is an EvalkitError; faults in the data are findings."""
    from evalkit.benchmarks import get_benchmark
    from evalkit.benchmarks.prepare import resolve_data, resolve_images
    from evalkit.benchmarks.readers.saved_index import LOCAL_FOLDER as INDEX_FOLDER
    from evalkit.benchmarks.readers.saved_index import indexing, indexing_of
    from evalkit.lint.cache import data_key, load_result, result_key, store_result

    bench = get_benchmark(bench_name)
    resolved = resolve_data(bench, data, options)
    path = resolved.path
    folder = resolve_images(image_dir or resolved.option_defaults.get("images"))
    # a big data file's saved index (the run's, or made now): the questions without reading the file again,
    # and a stored result below found after reading the index alone; the image checks read each image once
    ix = indexing_of(os.environ, None if cache_dir is None else Path(cache_dir) / INDEX_FOLDER, resolved.indexes)
    with indexing(ix):
        loaded = bench.load_lenient(path, folder, dict(options or {}))
    key = result_key(bench.name, data_key(path, loaded.items), [it.id for it in loaded.items])
    reused = load_result(cache_dir, key)
    if reused is not None:
        return reused
    found, n_images = check_items(bench.name, loaded.items)
    findings = relative(problem_findings(loaded.problems) + found, data_root(path))
    report = LintReport(bench.name, str(path), tuple(ordered(findings)), "full", len(loaded.items), n_images)
    store_result(cache_dir, key, report)
    return report, None
