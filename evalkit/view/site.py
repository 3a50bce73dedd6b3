"""Writing the site: index.html and its assets, the data as `<script>` chunks, thumbnails, plots.

The page must open from the file system with Chromium's default file:// rules, where fetch() and
XHR of local files are refused, so every piece of data is a script that calls a global function
(`EVK.rows(3, [...])`). The overview, the ids and the first rows load with the page; the other row
chunks follow one after another, and a question's details load only when it is opened. Nothing
comes from the network: the assets are package files copied next to index.html.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.version import __version__
from evalkit.images.pipeline import ImagePipeline
from evalkit.view.findings import question_findings
from evalkit.view.overview import overview
from evalkit.view.parses import ParseMemo
from evalkit.view.preamble import preamble_lengths
from evalkit.view.questions import rebuild
from evalkit.view.runs import ViewRun, read_runs, setting_notes
from evalkit.view.samples import Context, detail, image_refs, row
from evalkit.view.thumbs import ThumbStats, ThumbStore

ASSETS = Path(__file__).resolve().parent / "assets"
ASSET_FILES = ("core.js", "overview.js", "samples.js", "item.js", "app.css")
ROWS_PER_CHUNK = 2000  # table rows per data/rows-NNN.js
ITEMS_PER_CHUNK = 200  # question details per data/items-NNN.js
FACET = {"rgb-th-bench": "skill", "if-bench": "dimension"}  # what each benchmark calls its categories
DATA = "data"


@dataclass
class Site:
    """What a build wrote, and how long each part took."""

    out: Path
    benchmark: str
    models: list[str]
    questions: int
    files: list[str]  # the data files, relative to `out`
    thumbs: ThumbStats
    parses: tuple[int, int] = (0, 0)  # other-mode parses (computed now, found in the memo)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / "index.html"


def _default_out(run_dirs: Sequence[str | Path], benchmark: str) -> Path:
    """RUN_DIR/view for one run; runs/view-<bench> for several."""
    if len(run_dirs) == 1:
        return Path(run_dirs[0]) / "view"
    return Path("runs") / f"view-{benchmark}"


def build_site(run_dirs: Sequence[str | Path], out: str | Path | None = None, *, workers: int = 2) -> Site:
    """Read the runs, rebuild their questions, make the missing thumbnails and write the site."""
    with _no_gc():
        return _build(run_dirs, out, workers)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The build makes millions of small objects and no cycles worth collecting: the cyclic collector's
    passes over them were a third of a 30,000-question build."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _build(run_dirs: Sequence[str | Path], out: str | Path | None, workers: int) -> Site:
    clock = _Clock()
    runs = read_runs(run_dirs)
    clock.lap("read runs")
    site = Path(out) if out is not None else _default_out(run_dirs, runs[0].benchmark)
    if site.exists() and not site.is_dir():
        raise EvalkitError(f"--out {site}: exists and is not a folder")
    if any(site.resolve() == r.path.resolve() for r in runs):
        raise EvalkitError(f"--out {site}: is a run directory; choose a folder of its own (default RUN_DIR/view)")
    if site.is_dir() and any(site.iterdir()) and not (site / DATA / "meta.js").exists():
        raise EvalkitError(f"--out {site}: holds other files (it is not a site `evalkit view` wrote, whose stale "
                           "files a build removes); choose a new or empty folder")
    site.mkdir(parents=True, exist_ok=True)
    qs = rebuild(runs)
    clock.lap("rebuild questions")
    notes = [*setting_notes(runs), *qs.notes, *(n for r in runs for n in r.notes)]
    with contextlib.closing(ImagePipeline(max_bytes=64 * 2**20)) as pipeline:
        pipeline.know_span_hashes(qs.span_hashes)  # the thumbnails of images inside a data file: found unread
        store = ThumbStore(site, pipeline)
        handles = _want_thumbs(store, runs, qs.queries)
        clock.lap("hash images")
        store.make(workers)
        clock.lap("make thumbnails")

        def images_of(k: int, qid: str) -> list[dict[str, Any]]:
            return [store.get_dict(h, ref) for h, ref in handles.get((k, qid), ())]

        memo = ParseMemo(site)
        ctx = Context.make(runs, qs, images_of, memo)
        written = _write_samples(site, runs, qs, ctx)
        clock.lap("write samples")
        store.save()
        memo.save()
    meta = _meta(runs, qs, site, notes, len(written.rows), written)
    meta["pp"], meta["ps"] = ctx.affixes
    files = [*written.files, _write_script(site / DATA / "meta.js", "meta", meta)]
    _remove_stale(site / DATA, files)
    _write_assets(site, meta["stamp"])
    clock.lap("write overview and assets")
    return Site(site, runs[0].benchmark, [r.label for r in runs], len(qs.questions), files, store.stats,
                (memo.computed, memo.reused), clock.laps, notes)


def _want_thumbs(store: ThumbStore, runs: Sequence[ViewRun], queries: Sequence[dict[str, Any]]
                 ) -> dict[tuple[int, str], list[tuple[str, Any]]]:
    out: dict[tuple[int, str], list[tuple[str, Any]]] = {}
    seen: dict[tuple[int, str], list[tuple[str, Any]]] = {}  # runs that share a load share its queries
    for k, qmap in enumerate(queries):
        provider = runs[k].provider
        for qid, query in qmap.items():
            key = (id(query), provider)
            if key not in seen:
                seen[key] = [(store.want(ref, t, provider), ref) for ref, t in image_refs(query)]
            out[(k, qid)] = seen[key]
    return out


@dataclass
class _Written:
    rows: list[str] = field(default_factory=list)  # question ids, in table order
    files: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)


def _write_samples(site: Path, runs: Sequence[ViewRun], qs: Any, ctx: Context) -> _Written:
    out = _Written()
    out.categories = sorted({q.category for q in qs.questions})
    cat_index = {c: i for i, c in enumerate(out.categories)}
    cuts = preamble_lengths([q.question for q in qs.questions])
    rows: list[list[Any]] = []
    items: list[dict[str, Any]] = []
    for question in qs.questions:
        out.rows.append(question.id)
        rows.append(row(question, runs, cat_index, cuts.get(question.question, 0)))
        items.append(detail(question, ctx))
    data = site / DATA
    data.mkdir(parents=True, exist_ok=True)
    for k, start in enumerate(range(0, max(1, len(rows)), ROWS_PER_CHUNK)):
        out.files.append(_write_script(data / _chunk("rows", k), "rows", rows[start:start + ROWS_PER_CHUNK], k))
    for k, start in enumerate(range(0, len(items), ITEMS_PER_CHUNK)):
        out.files.append(_write_script(data / _chunk("items", k), "items", items[start:start + ITEMS_PER_CHUNK], k))
    out.files.append(_write_script(data / "ids.js", "ids", out.rows))
    return out


def _chunk(kind: str, k: int) -> str:
    return f"{kind}-{k:03d}.js"


def _meta(runs: Sequence[ViewRun], qs: Any, site: Path, notes: list[str], n: int, written: _Written
          ) -> dict[str, Any]:
    bench = runs[0].benchmark
    found = question_findings(runs, written.rows)
    return {
        "v": 1, "stamp": f"{time.time_ns():x}", "bench": bench, "facet": FACET.get(bench, "category"),
        "built": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "evalkit": __version__,
        "models": [r.label for r in runs], "modes": [r.mode for r in runs], "n": n,
        "rc": ROWS_PER_CHUNK, "nr": max(1, -(-n // ROWS_PER_CHUNK)), "dc": ITEMS_PER_CHUNK,
        "cats": written.categories, "notes": notes, "overview": overview(runs, site),
        "fd": found.findings, "fq": found.by_question,  # data findings; question id -> indices into fd
    }


def _write_script(path: Path, fn: str, data: Any, *args: Any) -> str:
    """data/<name>.js: one call of the page's registration function with the data as a JS literal."""
    head = "".join(f"{json.dumps(a)}," for a in args)
    text = f"EVK.{fn}({head}{json.dumps(data, ensure_ascii=False, separators=(',', ':'))});\n"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path.relative_to(path.parents[1]).as_posix()


def _remove_stale(folder: Path, keep: Sequence[str]) -> None:
    """Chunks of an earlier, larger build would be harmless but misleading: removed."""
    names = {Path(k).name for k in keep}
    for p in folder.glob("*.js"):
        if p.name not in names:
            p.unlink(missing_ok=True)


def _write_assets(site: Path, stamp: str) -> None:
    dest = site / "assets"
    dest.mkdir(exist_ok=True)
    for name in ASSET_FILES:
        shutil.copyfile(ASSETS / name, dest / name)
    html = (ASSETS / "index.html").read_text(encoding="utf-8").replace("{{STAMP}}", stamp)
    tmp = site / "index.html.tmp"
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, site / "index.html")


class _Clock:
    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._t, 3)
        self._t = now
