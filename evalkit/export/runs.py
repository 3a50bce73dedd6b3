"""A finished run directory as every export target reads it: summary, settings, provenance, records.

Read as it is on disk, never re-scored: an export says what the run's summary says. The settings
exported are the run's `config` in summary.json, which holds no keys; names that look like a secret
are dropped anyway, so a hand-edited or future config cannot carry one to a tracker.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.money.pricing import Price
from evalkit.money.shown import run_costs
from evalkit.rundir.costs import with_list_cost
from evalkit.rundir.layout import RECORDS, read_finished
from evalkit.rundir.records import damaged_note, read_records
from evalkit.rundir.rows import price_in

MANIFEST = "manifest.json"
REPORT = "report.md"
PLOTS = "plots"
# setting names never exported, whatever a config holds (exact names, or these endings)
SECRET_NAMES = frozenset({"key", "api_key", "apikey", "token", "access_token", "secret", "password",
                          "authorization", "credentials", "api-key"})
SECRET_ENDINGS = ("_api_key", "_secret", "_password", "_token", "_credentials")


@dataclass
class ExportRun:
    """One run directory, read for export."""

    path: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    loaded_records: list[Record] | None  # None: records.jsonl read on first use (MLflow and W&B never use it)
    notes: list[str] = field(default_factory=list)
    identity: dict[str, Any] = field(default_factory=dict)  # config.json's: what makes two runs the same run

    @property
    def records(self) -> list[Record]:
        """The run's records (the last valid one per query); damaged lines skipped, and said in `notes`."""
        if self.loaded_records is None:
            found = read_records(self.path / RECORDS)
            if found.damaged:
                self.notes.append(damaged_note(found.damaged, saved=False,
                                               then="their queries are left out of the export"))
            self.loaded_records = list(found.records.values())
        return self.loaded_records

    @property
    def name(self) -> str:
        return self.path.resolve().name

    @property
    def benchmark(self) -> str:
        return str(self.summary.get("benchmark") or "")

    @property
    def model(self) -> str:
        return str(self.summary.get("model") or "")

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.summary.get("config") or {})

    @property
    def data_source(self) -> dict[str, Any] | None:
        found = self.summary.get("data_source") or self.config.get("data_source")
        return dict(found) if isinstance(found, dict) else None

    @property
    def price(self) -> Price | None:
        """The price the run's costs were computed at (None: unknown, so no cost per query)."""
        return price_in(self.config)

    def settings(self) -> dict[str, Any]:
        """The run's settings (summary.json's config), without anything named like a secret."""
        return without_secrets(self.config)

    def metrics(self) -> dict[str, float]:
        """The official metrics' numeric leaves, by flattened name ("per_category/cat0")."""
        return flat_numbers(self.summary.get("metrics") or {})

    def artifacts(self) -> list[Path]:
        """report.md, summary.json, manifest.json and the plots, those that exist."""
        files = [self.path / name for name in (REPORT, "summary.json", MANIFEST)]
        plots = sorted((self.path / PLOTS).glob("*.png")) if (self.path / PLOTS).is_dir() else []
        return [p for p in files if p.is_file()] + plots

    def run_key(self) -> str:
        """The run identity (its data fingerprint included) as one stable text, `IDENTITY-DATA` (16 hex
        characters each): the same run exported again finds its tracker run by it (the `evalkit.run_id`
        tag). A 0.1.0 identity holds the data's path, not its fingerprint: that path stands in for it."""
        ident = json.dumps(self.identity, sort_keys=True, separators=(",", ":"), default=str)
        data = str(self.identity.get("data_sha256") or hashlib.sha256(str(self.identity.get("data")).encode())
                   .hexdigest())
        return f"{hashlib.sha256(ident.encode()).hexdigest()[:16]}-{data[:16]}"

    def records_sha256(self) -> str:
        try:
            return hashlib.sha256((self.path / RECORDS).read_bytes()).hexdigest()
        except OSError:
            return hashlib.sha256(b"").hexdigest()


def read_export_run(path: str | Path, *, records: bool = True) -> ExportRun:
    """A finished run directory, or one line saying why it is not one (exit 2). `records=False`: its
    records.jsonl is read only if used (a tracker export logs the summary's numbers, not the records)."""
    rundir, saved, summary = read_finished(Path(path))
    if not isinstance(summary, dict) or "metrics" not in summary:
        raise EvalkitError(f"{rundir.path / 'summary.json'}: no metrics; rebuild it with `evalkit report {path}`")
    manifest: dict[str, Any] = {}
    if (rundir.path / MANIFEST).is_file():
        try:
            loaded = json.loads((rundir.path / MANIFEST).read_text(encoding="utf-8"))
            manifest = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError) as e:
            raise EvalkitError(f"{rundir.path / MANIFEST}: unreadable ({e})") from e
    identity = saved.get("identity") if isinstance(saved.get("identity"), dict) else {}
    run = ExportRun(rundir.path, summary, manifest, None, [], dict(identity))
    usage = summary.get("usage")
    older = isinstance(usage, dict) and "list_cost_usd" not in usage  # a 0.3 summary: its list cost from its records
    if records or older:
        run.records  # noqa: B018 - read now, so its notes are said before anything is written
    if older:
        unscored = set(summary.get("unscored_ids") or ())
        run.summary = with_list_cost(summary, None, (r for r in run.records if r.query_id not in unscored))
    return run


def run_metrics(run: ExportRun) -> dict[str, float]:
    """What a tracker logs as metrics: the official ones, then counts/, usage/, service_tier/ (the answers per
    tier served, where the run asked a tier or a reply named one), cost/ (paid and list, as every report says
    them: evalkit/money/shown.py) and headline/ (value and its 95% interval)."""
    out = dict(run.metrics())
    for group in ("counts", "usage"):
        if isinstance(run.summary.get(group), dict):
            out.update({f"{group}/{k}": v for k, v in flat_numbers(run.summary[group]).items()})
    tiers = run.summary.get("service_tier")
    if isinstance(tiers, dict) and isinstance(tiers.get("served"), dict):  # answers per tier served (--service-tier)
        out.update({f"service_tier/{k}": v for k, v in flat_numbers(tiers["served"]).items()})
    costs = run_costs(run.summary)
    out.update(flat_numbers({"cost": {"paid_usd": costs.paid, "list_usd": costs.listed,
                                      "list_standard_usd": costs.standard}}))
    headline = run.summary.get("headline")
    if isinstance(headline, dict) and isinstance(headline.get("ci95"), list) and len(headline["ci95"]) == 2:
        out.update(flat_numbers({"headline": {"value": headline.get("value"), "ci95_low": headline["ci95"][0],
                                              "ci95_high": headline["ci95"][1]}}))
    return out


def is_secret_name(name: str) -> bool:
    low = name.lower()
    return low in SECRET_NAMES or low.endswith(SECRET_ENDINGS)


LOCAL_ONLY = ("cache_dir",)  # manifest entries that say where things are on this machine, for evalkit's own use


def shareable(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as an export shares it: without this machine's folders (the cache a re-report reads)."""
    return {k: v for k, v in manifest.items() if k not in LOCAL_ONLY}


def without_secrets(value: Any) -> Any:
    """`value` with every mapping entry named like a secret removed, at any depth."""
    if isinstance(value, Mapping):
        return {str(k): without_secrets(v) for k, v in value.items() if not is_secret_name(str(k))}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


def flat_numbers(tree: Mapping[str, Any], sep: str = "/") -> dict[str, float]:
    """Numeric leaves of nested mappings by joined name; booleans, None, NaN and text are left out."""
    return dict(_numbers(tree, "", sep))


def _numbers(tree: Mapping[str, Any], prefix: str, sep: str) -> Iterator[tuple[str, float]]:
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _numbers(value, name + sep, sep)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            yield name, float(value)


def flat_settings(tree: Mapping[str, Any], sep: str = ".") -> dict[str, str]:
    """Every leaf of nested settings as text by joined name (lists and None as JSON)."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = str(key)
        if isinstance(value, Mapping) and value:
            out.update({f"{name}{sep}{k}": v for k, v in flat_settings(value, sep).items()})
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return out
