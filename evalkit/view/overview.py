"""The overview the page opens on: leaderboard with intervals, official tables, counts, cost, provenance, plots.

Everything is read from what the runs already wrote (summary.json, manifest.json, plots/*.png,
report.md's figure titles): nothing is re-scored or redrawn, so a build stays cheap. Plots are
copied into the site (small, and the page must open with nothing outside its folder but the
full-size images).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalkit.grading.failures import banner
from evalkit.metrics.analysis.sample_note import sample_of, sample_tag, shown_tables
from evalkit.money.shown import run_costs
from evalkit.report.markdown import throughput_line
from evalkit.view.runs import ViewRun

COUNT_ORDER = ("correct", "wrong", "unparsed", "errors", "refusals", "cutoffs")
MANIFEST_FACTS = ("served_by", "evalkit", "git_commit", "python", "platform", "sdks", "data_sha256",
                  "official_source", "servers")
PLOTS = "plots"


def overview(runs: Sequence[ViewRun], site: Path) -> dict[str, Any]:
    """The overview's data (plain JSON), with the runs' plots copied into `site`/plots."""
    return {
        "leaderboard": leaderboard(runs),
        "tables": merged_tables(runs),
        "counts": _counts(runs),
        "cost": [_cost(r) for r in runs],
        "runs": [_run_facts(r, site) for r in runs],
        "plots": copy_plots(runs, Path(site) / PLOTS),
    }


def leaderboard(runs: Sequence[ViewRun]) -> list[dict[str, Any]]:
    """Each run's headline with its 95% interval (as its summary computed it), best first."""
    rows = []
    for k, r in enumerate(runs):
        h = r.summary.get("headline") or {}
        ci = h.get("ci95") or [None, None]
        rows.append({"run": k, "label": r.label, "metric": h.get("metric"), "value": h.get("value"),
                     "lo": ci[0], "hi": ci[1], "n": h.get("n_units"), "incomplete": incomplete(r.summary)})
    rows.sort(key=lambda x: (x["value"] is None, -(x["value"] or 0.0), x["label"]))
    return rows


def incomplete(summary: dict[str, Any]) -> str | None:
    """The leaderboard's mark of a run that is not complete ("incomplete: 228 of 1,624 answered"), None
    for a complete one: its headline is over what it answered, beside runs that answered everything."""
    sample = sample_of(summary)
    if sample is not None:  # a run that stopped once its answer was known: never shown as the whole set
        return sample_tag(sample)
    if summary.get("complete", True):
        return None
    counts = summary.get("counts") or {}
    n = int(summary.get("n_queries") or 0)
    done = n - int(summary.get("missing") or 0) - int(counts.get("errors") or 0) - int(counts.get("data_errors") or 0)
    return f"incomplete: {max(0, done):,} of {n:,} answered"


def merged_tables(runs: Sequence[ViewRun]) -> list[dict[str, Any]]:
    """The official tables, one per title and head. A table with a row per model gets every run's row
    (under its label); any other (per category, say) gets a column per run where the runs differ."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in runs:
        sample = sample_of(r.summary)
        label = f"{r.label} ({sample_tag(sample)})" if sample else r.label
        for t in shown_tables(r.summary):  # a sample's: marked as estimates, or left out with a line
            if t.get("left_out"):
                t = {"title": t["title"], "head": [], "rows": [], "note": t["left_out"]}
            if not isinstance(t.get("rows"), list):
                continue
            head = list(t.get("head") or [])
            key = (str(t.get("title", "")), json.dumps(head, default=str))
            g = groups.get(key)
            if g is None:
                g = groups[key] = {"title": key[0], "head": head, "note": t.get("note"),
                                   "groups": list(t.get("groups") or []), "models": [], "rest": None, "runs": []}
            mine = [row for row in t["rows"] if row and row[0] == r.model]
            if mine:
                g["models"] += [[label, *row[1:]] for row in mine]
                if g["rest"] is None:  # e.g. the "questions" row under the models: the same for every run
                    g["rest"] = [row for row in t["rows"] if not (row and row[0] == r.model)]
            else:
                g["runs"].append((label, t["rows"]))
    out = []
    for g in groups.values():
        entry = {k: g[k] for k in ("title", "head", "note", "groups")}
        if g["models"]:
            entry["rows"] = g["models"] + (g["rest"] or [])
        elif len(g["runs"]) == 1:
            entry["rows"] = g["runs"][0][1]
            if len(runs) > 1:
                entry["of"] = g["runs"][0][0]
        else:
            entry["head"], entry["rows"] = _side_by_side(g["head"], g["runs"])
        out.append(entry)
    return out


def _side_by_side(head: list[Any], per_run: list[tuple[str, list[list[Any]]]]) -> tuple[list[Any], list[list[Any]]]:
    """One table from the runs' tables of one shape: rows by their first cell; a column the runs agree
    on (the number of questions, say) once, any other once per run."""
    keys: list[Any] = []
    cells: list[dict[str, list[Any]]] = []
    for _, rows in per_run:
        mine = {}
        for row in rows:
            if row:
                k = json.dumps(row[0], default=str)
                if k not in mine and k not in keys:
                    keys.append(k)
                mine[k] = row
        cells.append(mine)
    width = max((len(row) for _, rows in per_run for row in rows), default=len(head))
    new_head: list[Any] = [head[0] if head else ""]
    columns: list[tuple[int, int | None]] = []  # (column, run) ; run None: the same in every run
    for j in range(1, width):
        same = len({json.dumps([(m.get(k) or [None] * width)[j:j + 1] for k in keys], default=str)
                    for m in cells}) == 1
        name = head[j] if j < len(head) else ""
        if same:
            new_head.append(name)
            columns.append((j, None))
        else:
            new_head += [f"{name} · {label}" for label, _ in per_run]
            columns += [(j, i) for i in range(len(per_run))]
    rows_out = []
    for k in keys:
        first = next(m[k] for m in cells if k in m)
        row = [first[0]]
        for j, i in columns:
            src = first if i is None else cells[i].get(k)
            row.append(src[j] if src is not None and j < len(src) else None)
        rows_out.append(row)
    return new_head, rows_out


def _counts(runs: Sequence[ViewRun]) -> dict[str, Any]:
    """Every key any summary's counts has (the usual ones first), and the queries, per run."""
    keys = [k for k in COUNT_ORDER if any(k in (r.summary.get("counts") or {}) for r in runs)]
    keys += sorted({k for r in runs for k in (r.summary.get("counts") or {})} - set(keys))
    return {"keys": keys, "values": [[(r.summary.get("counts") or {}).get(k) for k in keys] for r in runs],
            "queries": [r.summary.get("n_queries") for r in runs], "missing": [r.summary.get("missing") for r in runs]}


def _cost(r: ViewRun) -> dict[str, Any]:
    u, cache = r.summary.get("usage") or {}, r.summary.get("cache") or {}
    t = r.summary.get("throughput")
    costs = run_costs(r.summary)  # paid and list, as every report says them
    return {"input_tokens": u.get("input_tokens"), "output_tokens": u.get("output_tokens"),
            "reasoning_tokens": u.get("reasoning_tokens"), "cost_usd": u.get("cost_usd"),
            "paid_usd": costs.paid, "list_cost_usd": costs.listed, "cost": costs.text(),
            "hits": cache.get("hits"), "misses": cache.get("misses"),
            "speed": throughput_line(t) if isinstance(t, dict) and t.get("ask_s") is not None else None}


def _run_facts(r: ViewRun, site: Path) -> dict[str, Any]:
    s = r.summary
    manifest = r.manifest or {}
    facts = [[k, manifest[k]] for k in MANIFEST_FACTS if manifest.get(k) not in (None, {}, [])]
    modes = s.get("parser_modes") or {}
    return {
        "label": r.label, "model": r.model, "dir": r.path.name, "link": _rel(r.path, site),
        "mode": r.mode, "items": s.get("n_items"), "queries": s.get("n_queries"), "complete": s.get("complete", True),
        "missing": s.get("missing", 0), "version": s.get("evalkit_version") or manifest.get("evalkit"),
        "source": s.get("official_source"), "deviations": s.get("deviations") or [], "banner": banner(s),
        "manifest": facts, "has_manifest": r.manifest is not None, "settings": r.identity,
        "modes": modes or None, "judge": s.get("judge"), "hint": s.get("hint"), "notes": r.notes,
        "structured": _structured_fact(s),
    }


def _structured_fact(summary: dict[str, Any]) -> str | None:
    """The run-facts line for `--structured` (summary.json's "structured"), or None: it was off."""
    block = summary.get("structured")
    if not isinstance(block, dict):
        return None
    return (f"on: {block.get('queries')} queries asked for a JSON answer in the benchmark's schema, "
            f"{block.get('read')} read from it")


def _rel(path: Path, site: Path) -> str:
    try:
        return quote(os.path.relpath(path, site).replace(os.sep, "/")) + "/"
    except ValueError:
        return path.resolve().as_uri() + "/"


_FIGURE = re.compile(r"^### (.+)\n\n!\[[^\]]*\]\((plots/[^)]+\.png)\)", re.M)


def plot_titles(run_dir: Path) -> dict[str, str]:
    """The figure titles report.md gives its plots (file name -> title)."""
    try:
        text = (run_dir / "report.md").read_text(encoding="utf-8")
    except OSError:
        return {}
    return {Path(rel).name: title for title, rel in _FIGURE.findall(text)}


def copy_plots(runs: Sequence[ViewRun], folder: Path) -> list[list[dict[str, str]]]:
    """Each run's plots copied to `folder`/<run>/ (only when changed); stale copies removed."""
    out: list[list[dict[str, str]]] = []
    keep: set[str] = set()
    for k, r in enumerate(runs):
        sub = f"{k}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', r.path.name)[:60]}"
        keep.add(sub)
        titles = plot_titles(r.path)
        mine = []
        for png in r.plots:
            dest = folder / sub / png.name
            src = png.stat()
            if not dest.exists() or dest.stat().st_size != src.st_size or dest.stat().st_mtime_ns != src.st_mtime_ns:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(png, dest)
            title = titles.get(png.name) or png.stem.replace("_", " ").capitalize()
            mine.append({"title": title, "src": f"{PLOTS}/{quote(sub)}/{quote(png.name)}"})
        names = {png.name for png in r.plots}
        if (folder / sub).is_dir():
            for old in (folder / sub).iterdir():
                if old.name not in names:
                    old.unlink(missing_ok=True)
        out.append(mine)
    if folder.is_dir():
        for sub in folder.iterdir():
            if sub.is_dir() and re.match(r"\d+-", sub.name) and sub.name not in keep:
                shutil.rmtree(sub, ignore_errors=True)
    return out
