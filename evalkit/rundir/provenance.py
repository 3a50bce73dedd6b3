"""Who answered and with what: the run directory's `manifest.json`, its key facts in summary.json.

Published numbers drift when the model behind a name changes, so every run keeps the snapshot each
reply named (the response's `model`, OpenAI's `system_fingerprint`, Gemini's `modelVersion`; counted
per distinct value over the run's records, cache hits included — they were answered by that snapshot),
what the servers said of themselves (vLLM's `/version` and served models, from the preflight's
metadata calls), evalkit's version and git commit, Python, the platform, the SDK versions, the
data's content fingerprint and the official source its protocol follows.
"""

from __future__ import annotations

import json
import platform
from collections import Counter
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from evalkit.ask.runner import Runner
from evalkit.core.files import write_json_atomic
from evalkit.core.record import Record
from evalkit.core.tiers import tier_counts
from evalkit.core.version import __version__
from evalkit.rundir.throughput import throughput

MANIFEST = "manifest.json"
SDKS = ("aiohttp", "openai", "anthropic", "google-genai", "pillow", "scipy")


def served_by(records: Iterable[Record]) -> dict[str, int]:
    """Answers per snapshot named by the replies, most frequent first ("unnamed": replies that say none)."""
    counts = Counter(r.served_by or "unnamed" for r in records if r.error is None and r.response is not None)
    return dict(counts.most_common())


def tier_summary(requested: str | None, records: Iterable[Record]) -> dict[str, Any] | None:
    """summary.json's and manifest.json's `service_tier`: the tier asked for (--service-tier; None: none) and
    the answers per tier their replies said served them (`unreported`: replies that said none); None for a run
    that asked no tier and got no answer naming one (its files stay as they always were)."""
    answered = [r.served_tier for r in records if r.error is None and r.response is not None]
    if requested is None and not any(answered):
        return None
    return {"requested": requested, "served": tier_counts(answered)}


def git_commit(root: Path | None = None) -> str | None:
    """The commit of the checkout evalkit runs from (read from .git, no git process), else None."""
    git = (root or Path(__file__).resolve().parents[2]) / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12] or None
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()[:12]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        return None
    return None


def sdk_versions() -> dict[str, str]:
    """Installed versions of the libraries that shape requests and numbers (read from metadata, not imported)."""
    out = {}
    for name in SDKS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        out[name] = _version_line(dist.read_text("METADATA")) or dist.version
    return out


def _version_line(text: str | None) -> str | None:
    """The `Version:` header of a METADATA file, read without the email parser (which read the whole
    long description of each package: a tenth of a warm re-run's closing)."""
    for line in (text or "").splitlines():
        if not line.strip():
            return None  # the headers end at the first blank line
        if line.startswith("Version:"):
            return line[len("Version:"):].strip() or None
    return None


def manifest(records: Iterable[Record], *, identity: dict[str, Any], servers: dict[str, dict],
             official_source: str | None, data_source: dict[str, Any] | None = None,
             service_tier: str | None = None, cache_dir: Path | None = None) -> dict[str, Any]:
    records = list(records)
    tiers = tier_summary(service_tier, records)  # a delivery setting: here, never in the identity
    return {"served_by": served_by(records), "servers": servers, "evalkit": __version__, "git_commit": git_commit(),
            "python": platform.python_version(), "platform": platform.platform(), "sdks": sdk_versions(),
            "data_sha256": identity.get("data_sha256"), "data_source": data_source, "official_source": official_source,
            **({"service_tier": tiers} if tiers is not None else {}),
            # the cache folder the run used (absolute): where `evalkit report` and `evalkit view` find the saved
            # index of its data, not reading the data again (engine/run_data.py, index_places)
            **({"cache_dir": str(cache_dir.absolute())} if cache_dir is not None else {})}


def write_manifest(run_dir: Path, facts: dict[str, Any]) -> dict[str, Any]:
    """manifest.json; servers seen by earlier invocations of the run are kept (a run answered from the
    cache probes nothing). Returns what was written."""
    try:
        previous = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = None
    if isinstance(previous, dict) and isinstance(previous.get("servers"), dict):
        facts = {**facts, "servers": {**previous["servers"], **facts["servers"]}}
    write_json_atomic(run_dir / MANIFEST, facts)
    return facts


def run_facts(run_dir: Path, records: Sequence[Record], identity: dict[str, Any], servers: dict[str, dict],
              official_source: str | None, fresh: Sequence[Record], ask_s: float, runner: Runner,
              data_source: dict[str, Any] | None = None, service_tier: str | None = None,
              cache_dir: Path | None = None) -> dict[str, Any]:
    """summary.json's "provenance" (manifest.json written) and "throughput": this invocation's when it
    sent anything, else the one the run directory's summary already holds (the last that did)."""
    facts = write_manifest(run_dir, manifest(records, identity=identity, servers=servers,
                                             official_source=official_source, data_source=data_source,
                                             service_tier=service_tier, cache_dir=cache_dir))
    out: dict[str, Any] = {"provenance": key_facts(facts)}
    pool_stats = getattr(getattr(runner.provider, "pool", None), "stats", None)
    s = runner.stats
    speed = throughput(fresh, ask_s, attempts=s.attempts, retries=s.retries, rate_limited=s.rate_limited,
                       output_tokens=s.output_tokens, replicas=pool_stats() if pool_stats else None,
                       limits=runner.limiter.learned(), capacity_refused=s.capacity_refused,
                       tier_fallbacks=s.tier_fallbacks)
    if speed is None:
        try:
            speed = json.loads((run_dir / "summary.json").read_text(encoding="utf-8")).get("throughput")
        except (OSError, ValueError, AttributeError):
            speed = None
    if speed is not None:
        out["throughput"] = speed
    return out


def key_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """What summary.json and the report repeat."""
    return {k: facts[k] for k in ("served_by", "evalkit", "git_commit", "official_source") if k in facts}
