"""What a run's data is and where it came from: the `--data SOURCE` forms, parsed, and the
`data_source` record a run directory keeps (manifest.json with every file's sha256, summary.json
without them)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError

KINDS = ("hub", "archive", "local", "sample")
HUB_SCHEME = "hf://"
SAMPLE = "sample"
COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


@dataclass(frozen=True)
class HubRef:
    """`hf://OWNER/NAME[@REVISION][/PATH]`: a dataset repository on the Hub, a revision (branch, tag or
    commit; None = its default branch) and optionally one file or folder in it."""

    repo: str
    revision: str | None = None
    path: str = ""

    @property
    def uri(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"{HUB_SCHEME}{self.repo}{rev}{'/' + self.path if self.path else ''}"


@dataclass(frozen=True)
class DataSource:
    """Where a run's data came from. `commit` pins a hub or archive source; `files` maps each data file
    (relative to the data root) to its sha256 (manifest.json only)."""

    kind: str
    uri: str
    endpoint: str | None = None
    revision: str | None = None
    commit: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self, *, files: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "uri": self.uri, "endpoint": self.endpoint,
                               "revision": self.revision, "commit": self.commit}
        if files:
            out["files"] = dict(sorted(self.files.items()))
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DataSource:
        kind = str(d.get("kind") or "local")
        return cls(kind if kind in KINDS else "local", str(d.get("uri") or ""), d.get("endpoint"), d.get("revision"),
                   d.get("commit"), {str(k): str(v) for k, v in (d.get("files") or {}).items()})

    @property
    def is_sample(self) -> bool:
        return self.kind == SAMPLE

    @property
    def base_uri(self) -> str:
        """The repository without revision or path: what a lock entry is keyed by."""
        if self.kind == "hub":
            return HUB_SCHEME + "/".join(self.uri[len(HUB_SCHEME):].split("/")[:2]).split("@")[0]
        return self.uri.split("/tree/")[0]


def parse_hub(text: str) -> HubRef:
    """`hf://OWNER/NAME[@REVISION][/PATH]` -> HubRef; anything else is one line naming the form."""
    if not text.startswith(HUB_SCHEME):
        raise EvalkitError(f"--data {text}: not a Hub source (hf://OWNER/NAME[@REVISION][/PATH])")
    rest = text[len(HUB_SCHEME):].strip("/")
    parts = rest.split("/", 2)
    if len(parts) < 2:
        raise EvalkitError(f"--data {text}: expected hf://OWNER/NAME[@REVISION][/PATH]")
    owner, name = parts[0], parts[1]
    path = parts[2] if len(parts) > 2 else ""
    revision = None
    if "@" in name:
        name, revision = name.split("@", 1)
        if not revision:
            raise EvalkitError(f"--data {text}: empty revision after '@'")
    if not _REPO.fullmatch(f"{owner}/{name}"):
        raise EvalkitError(f"--data {text}: '{owner}/{name}' is not a repository name (OWNER/NAME)")
    if ".." in path.split("/"):
        raise EvalkitError(f"--data {text}: '..' is not allowed in the path")
    return HubRef(f"{owner}/{name}", revision, path)


def is_hub(text: str | Path | None) -> bool:
    return isinstance(text, str) and text.startswith(HUB_SCHEME)


def is_sample(text: str | Path | None) -> bool:
    return isinstance(text, str) and text == SAMPLE


def sample_label(n_items: int) -> str:
    """What a run on the bundled sample says first, wherever it is shown: never a silent sample."""
    return f"the bundled sample ({n_items} items), not the benchmark"


def data_headline(source: Mapping[str, Any] | DataSource | None, n_items: int) -> str | None:
    """The sample's label for a run's `data_source` (a record or its dict); None for real data."""
    kind = source.kind if isinstance(source, DataSource) else (source or {}).get("kind")
    return sample_label(n_items) if kind == SAMPLE else None


def _as_source(source: Mapping[str, Any] | DataSource) -> DataSource:
    return source if isinstance(source, DataSource) else DataSource.from_dict(source)


def where_read(source: Mapping[str, Any] | DataSource, data_sha256: str | None = None) -> str:
    """One source as a run names what it read: a Hub dataset at its commit
    (`hf://OWNER/NAME@<commit>[/PATH]`), a repository's files at theirs, a local path with the sha256 of
    its content (the data fingerprint: its files and the images they name)."""
    src = _as_source(source)
    if src.kind == "hub" and src.commit:
        rest = src.uri[len(HUB_SCHEME):].split("/", 2)
        return f"{src.base_uri}@{src.commit}" + (f"/{rest[2]}" if len(rest) > 2 else "")
    if src.kind == "archive" and src.commit and src.commit not in src.uri:
        return f"{src.uri}@{src.commit}"
    if src.kind == "local" and data_sha256:
        return f"{src.uri}, content sha256 {data_sha256}"
    return src.uri


def data_used(source: Mapping[str, Any] | DataSource | None, n_items: int, data_sha256: str | None = None,
              parts: Sequence[Mapping[str, Any] | DataSource] = ()) -> str | None:
    """What a run says first, on the console ("data: …") and at the top of report.md: the sample's
    label, or every source read (`parts` where the data has more than one: IF-Bench's questions and
    images), each at its commit or with its sha256."""
    if not source:
        return None
    src = _as_source(source)
    if src.is_sample:
        return sample_label(n_items)
    if not src.uri:
        return None
    named = [where_read(p) for p in parts[1:]] if len(parts) > 1 else []
    return f"{' and '.join([where_read(src, data_sha256), *named])} ({n_items:,} items)"


def data_named(summary: Mapping[str, Any]) -> str | None:
    """Which data a run read, from its summary.json (or, after `evalkit report`, the settings it keeps):
    the console's `data:` line and report.md's first."""
    config = summary.get("config") if isinstance(summary.get("config"), Mapping) else {}
    return data_used(summary.get("data_source") or config.get("data_source"), int(summary.get("n_items") or 0),
                     config.get("data_sha256"), summary.get("data_parts") or ())


def source_phrase(source: DataSource, n_items: int) -> str:
    """One phrase naming a run's data, for the dry run and the console."""
    if source.kind == SAMPLE:
        return sample_label(n_items)
    pin = f" @ {source.commit[:12]}" if source.commit else ""
    return f"{source.uri}{pin} ({n_items} items)"
