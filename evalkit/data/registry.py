"""The registry of official sources (registry.toml, data not code): per benchmark, where its authors
publish the files, at which revision, and how each file is checked. Which files a run fetches follows
the benchmark's own options (`when`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REGISTRY = Path(__file__).with_name("registry.toml")

# The value an option has when the user does not set it, as `when` names it.
OPTION_DEFAULTS = {"td_set": "all", "mme_lang": "auto", "mme_set": "full"}


@dataclass(frozen=True)
class RegistryFile:
    path: str  # in the repository; ending in "/" = every file under that folder
    md5: str | None = None  # a published md5 of the file as served
    size: int | None = None
    when: tuple[tuple[str, tuple[str, ...]], ...] = ()
    questions: int | None = None  # published question count of this file (before evalkit's variants)
    sha256: str | None = None  # a published sha256 of the file (its LFS pointer's), checked on download

    def wanted(self, options: Mapping[str, Any]) -> bool:
        """Whether a run with these benchmark options reads this file."""
        for key, values in self.when:
            value = options.get(key)
            if str(OPTION_DEFAULTS.get(key) if value is None else value) not in values:
                return False
        return True

    @property
    def is_folder(self) -> bool:
        return self.path.endswith("/")


@dataclass(frozen=True)
class RegistrySource:
    bench: str
    name: str
    kind: str  # "hub" | "git"
    repo: str
    revision: str
    read: str
    layout: str
    checksums: str
    files: tuple[RegistryFile, ...]
    size: int | None = None
    root: str = ""  # the folder in the repository the benchmark loads ("" = the top)
    role: str = "data"  # "data", or the option this source's folder fills: "images", "translated_images"
    questions: int | None = None  # published question count of the source's files (when not per file)
    checksum_source: str = ""  # who publishes the checksums, and where (said when a file does not match)
    licence: str = ""  # the licence and terms as the publishers state them, each with where it was read

    def questions_for(self, options: Mapping[str, Any]) -> int | None:
        """The published number of questions a run with these options reads from this source, or None."""
        wanted = self.wanted(options)
        per_file = [f.questions for f in wanted if f.questions is not None]
        if per_file:  # files without a count hold none of their own (images, a rotation of counted problems)
            return sum(per_file)
        return self.questions if wanted and self.role == "data" else None

    def fills(self, folder: Path) -> dict[str, str]:
        """Option defaults this source provides (a second source holding a benchmark's images)."""
        return {} if self.role == "data" else {self.role: str(folder)}

    @property
    def uri(self) -> str:
        if self.kind == "hub":
            return f"hf://{self.repo}" + (f"@{self.revision}" if self.revision != "main" else "")
        return f"https://github.com/{self.repo}/tree/{self.revision}"

    @property
    def published_size(self) -> int | None:
        """The source's size as published: its own, else the sum of its files' when every one has one."""
        if self.size is not None:
            return self.size
        sizes = [f.size for f in self.files]
        return sum(x for x in sizes if x is not None) if sizes and None not in sizes else None

    @property
    def checksummed(self) -> bool:
        """False where the files are checked only by the sha256 the lock records on first download."""
        return self.checksums != "first-download"

    def wanted(self, options: Mapping[str, Any]) -> tuple[RegistryFile, ...]:
        return tuple(f for f in self.files if f.wanted(options))


def _file(raw: Mapping[str, Any]) -> RegistryFile:
    when = tuple(sorted((str(k), tuple(str(x) for x in (v if isinstance(v, list) else [v])))
                        for k, v in (raw.get("when") or {}).items()))
    size = raw.get("size")
    questions = raw.get("questions")
    return RegistryFile(str(raw["path"]), raw.get("md5"), int(size) if size is not None else None, when,
                        int(questions) if questions is not None else None, raw.get("sha256"))


def parse_registry(raw: Mapping[str, Any]) -> tuple[RegistrySource, ...]:
    out = []
    for s in raw.get("source", []):
        try:
            out.append(RegistrySource(
                bench=str(s["bench"]), name=str(s["name"]), kind=str(s["kind"]), repo=str(s["repo"]),
                revision=str(s.get("revision") or "main"), read=str(s.get("read", "")), layout=str(s.get("layout", "")),
                checksums=str(s.get("checksums", "first-download")),
                files=tuple(_file(f) for f in s.get("files", [])),
                size=int(s["size"]) if s.get("size") is not None else None,
                root=str(s.get("root", "")).strip("/"), role=str(s.get("role", "data")),
                questions=int(s["questions"]) if s.get("questions") is not None else None,
                checksum_source=str(s.get("checksum_source", "")), licence=str(s.get("licence", ""))))
        except (KeyError, TypeError, ValueError) as e:
            raise EvalkitError(f"{REGISTRY}: source {s.get('name', '?')}: {e}") from None
    return tuple(out)


@cache
def _load(path: Path) -> tuple[RegistrySource, ...]:
    try:
        with path.open("rb") as f:
            return parse_registry(tomllib.load(f))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise EvalkitError(f"{path}: cannot read the data registry ({e})") from None


def registry(env: Mapping[str, str] | None = None) -> tuple[RegistrySource, ...]:
    """The registry evalkit ships, or the one `EVALKIT_REGISTRY` names (an organisation's mirror of the
    benchmarks under other repositories, in the same form)."""
    own = (env or {}).get("EVALKIT_REGISTRY")
    return _load(Path(own).expanduser().resolve() if own else REGISTRY)


def sources_for(bench: str, env: Mapping[str, str] | None = None) -> tuple[RegistrySource, ...]:
    return tuple(s for s in registry(env) if s.bench == bench)
