"""The other parse mode's reading of every answer, remembered in the site so a rebuild does not redo it.

A run parses its answers in one mode (official or robust); the page shows both verdicts, so the
other mode's parse (`Benchmark.parse(query, text, mode)`) is computed at build time. At 30,000
questions x several models that is most of a build's work, and its result changes only with the
answer, the question and the rules, so each reading is kept in memo/parses.json under a hash of
the evalkit version, the benchmark and its load settings, the data's identity, the query id, the
gold answer, the answer text and the mode.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from evalkit.benchmarks.base import Benchmark
from evalkit.core.types import Query
from evalkit.core.version import __version__

FOLDER = "memo"
FILE = "parses.json"
VERSION = 1


class ParseMemo:
    """`read(...)` gives the other mode's {mode, p, m, ok}; `save()` keeps the readings this build used."""

    def __init__(self, site: Path):
        self.path = Path(site) / FOLDER / FILE
        self._old = _read(self.path)
        self._used: dict[str, list[Any]] = {}
        self.computed = 0
        self.reused = 0

    @staticmethod
    def context(bench: str, load_key: str, data: Any) -> bytes:
        """What every reading of one run depends on besides the answer (computed once per run)."""
        blob = json.dumps([__version__, bench, load_key, data], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).digest()

    def read(self, bench: Benchmark, query: Query, context: bytes, qid: str, response: str, mode: str
             ) -> dict[str, Any]:
        h = hashlib.blake2b(context, digest_size=12)
        h.update(f"\0{qid}\0{query.gold}\0{mode}\0".encode())
        h.update(response.encode("utf-8", "surrogatepass"))
        key = h.hexdigest()
        hit = self._used.get(key) or self._old.get(key)
        if hit is not None:
            self.reused += 1
        else:
            parsed = bench.parse(query, response, mode)
            ok = bench.score(query, parsed)
            hit = [parsed.answer, parsed.method, ok]
            self.computed += 1
        self._used[key] = hit
        return {"mode": mode, "p": hit[0], "m": hit[1], "ok": hit[2]}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": VERSION, "readings": self._used}, ensure_ascii=False,
                                  separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, self.path)


def _read(path: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("readings"), dict):
        return {}
    return data["readings"]
