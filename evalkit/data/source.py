"""What a run's data is and where it came from: the `--data SOURCE` forms, parsed, and the
`data_source` record a run directory keeps (manifest.json with every file's sha256, summary.json
without them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
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


def source_phrase(source: DataSource, n_items: int) -> str:
    """One phrase naming a run's data, for the dry run and the console."""
    if source.kind == SAMPLE:
        return sample_label(n_items)
    pin = f" @ {source.commit[:12]}" if source.commit else ""
    return f"{source.uri}{pin} ({n_items} items)"
