"""`evalkit data list|pull|verify|path|lock`: the registry's sources, fetched ahead of time (e.g. on a
login node), checked again byte for byte, located, and pinned in a lock file."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.data.lock import LOCK_NAME, lock_key, read_lock, write_lock
from evalkit.data.registry import RegistrySource, registry
from evalkit.data.request import DataRequest, Resolved
from evalkit.data.source import DataSource, is_hub

CHECKSUM_WORDS = {"md5": "md5 (published)", "hub": "Hub listing (sha256 / git blob)", "git-blob": "git blob id",
                  "first-download": "pinned, not checksummed"}


def when_keys() -> list[str]:
    return sorted({k for s in registry(os.environ) for f in s.files for k, _ in f.when})


def add_parser(sub: Any) -> None:
    p = sub.add_parser("data", help="the benchmarks' official data: list, pull, verify, path, lock",
                       description="The registry of official sources, and what is cached of them.")
    p.add_argument("action", choices=("list", "pull", "verify", "path", "lock"),
                   help="list: the registry and what is cached; pull: fetch ahead of time; verify: check the cached "
                        "files byte for byte; path: where a source is cached; lock: pin the sources in a lock file")
    p.add_argument("targets", nargs="*", metavar="BENCH|SOURCE",
                   help="benchmarks (their official sources) or hf://OWNER/NAME[@REVISION][/PATH]")
    p.add_argument("--lock", metavar="FILE", help=f"the lock file (default ./{LOCK_NAME} when it exists; "
                                                   f"`lock` writes ./{LOCK_NAME} by default)")
    for key in when_keys():
        p.add_argument("--" + key.replace("_", "-"), dest=key, help="as for `evalkit run` (which files to fetch)")


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in when_keys() if getattr(args, k, None) is not None}


def _progress_factory() -> Callable[[str, int], Callable[[int], None] | None]:
    from evalkit.data.progress import download_bar

    return download_bar


def _resolve(target: str, args: argparse.Namespace, env: Mapping[str, str], lock_path: Path | None,
             sample_of: Callable[[str], str | None], plan_only: bool = False) -> Resolved:
    from evalkit.data.resolve import resolve_source  # (the fetching code: not for building the parser)

    if is_hub(target):
        bench, data, default = "mcq", target, None
    else:
        bench, data, default = target, None, sample_of(target)  # an unknown benchmark is one line there
    return resolve_source(DataRequest(bench, data, _options(args), env, lock_path=lock_path, default_sample=default,
                                      plan_only=plan_only, progress=None if plan_only else _progress_factory()))


def _targets(args: argparse.Namespace, env: Mapping[str, str]) -> list[str]:
    return args.targets or sorted({s.bench for s in registry(env)})


def _local_state(entry: RegistrySource, env: Mapping[str, str]) -> str:
    """What of a source is cached, asking nothing."""
    from evalkit.data.hub import HubEnv, repo_folder

    if entry.kind == "hub":
        folder = repo_folder(HubEnv.from_env(env), entry.repo) / "snapshots"
    else:
        from evalkit.data.archive import GitEnv

        folder = GitEnv.from_env(env).cache_dir / entry.repo
    commits = sorted(p.name for p in folder.iterdir() if p.is_dir() and len(p.name) == 40) if folder.is_dir() else []
    return f"cached at {', '.join(c[:12] for c in commits)}" if commits else "not cached"


def _size(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _list_sources(env: Mapping[str, str]) -> int:
    rows = [("benchmark", "source", "where", "files", "size", "checksums", "read", "here")]
    for s in registry(env):
        pin = "" if s.revision == "main" else f"@{s.revision[:12]}"
        where = f"hf://{s.repo}{pin}" if s.kind == "hub" else f"github:{s.repo}{pin}"
        sums = CHECKSUM_WORDS.get(s.checksums, s.checksums) + (" + sha256" if any(f.sha256 for f in s.files) else "")
        rows.append((s.bench, s.name, where, str(len(s.files)), _size(s.published_size), sums, s.read,
                     _local_state(s, env)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print("pope and mcq have no official source in this release: name their data with --data PATH or --data sample")
    published = [(s.name, f) for s in registry(env) for f in s.files if f.sha256 or f.size]
    if published:
        print("\nfiles with a published size or sha256 (checked on download):")
        for name, f in published:
            size = f"{f.size:,} bytes" if f.size is not None else "size not published"
            print(f"  {name}: {f.path}: {size}" + (f", sha256 {f.sha256}" if f.sha256 else ""))
    print("\nlicences and terms, as their publishers state them (docs/data.md has the sources):")
    terms: dict[str, list[str]] = {}
    for s in registry(env):
        terms.setdefault(s.licence or "none recorded in this registry", []).append(s.name)
    for text, names in terms.items():
        print(f"  {', '.join(names)}: {text}")
    return 0


def _checked(n: int, unchecked: int) -> str:
    """What `pull` says of a source's files: checked against a published or listed hash, or only pinned."""
    if not unchecked:
        return f"{n} files, checked"
    pinned = "pinned by the sha256 of their first download (the listing gives no hashes)"
    return f"{n} files, {pinned}" if unchecked >= n else f"{n} files, {n - unchecked} checked, {unchecked} {pinned}"


def _verify(resolved: Resolved) -> list[str]:
    """Every file read again: its sha256 against what resolving recorded, and a Hub blob against its name."""
    from evalkit.data.checksums import file_digest

    bad = []
    for part in resolved.parts or (resolved.source,):
        for rel, sha in sorted(part.files.items()):
            local = _local_path(resolved, part, rel)
            if local is None:
                continue
            found = file_digest(local, "sha256")
            blob = os.path.basename(os.readlink(local)) if local.is_symlink() else ""
            if found != sha or (len(blob) == 40 and file_digest(local, "git") != blob):
                bad.append(f"{part.uri}: {rel}: sha256 {found}, expected {sha}")
    return bad


def _local_path(resolved: Resolved, part: DataSource, rel: str) -> Path | None:
    for root in (resolved.path, resolved.path.parent):
        candidate = root / rel
        if candidate.exists():
            return candidate
    return None


def main(args: argparse.Namespace, env: Mapping[str, str] | None = None,
         sample_of: Callable[[str], str | None] = lambda bench: None) -> int:
    """`sample_of(bench)`: the benchmark's bundled sample (the CLI knows the benchmarks; this layer does not)."""
    env = os.environ if env is None else env
    lock_path = Path(args.lock) if args.lock else None
    if args.action == "list":
        return _list_sources(env)
    read_lock_path = lock_path if args.action != "lock" else (lock_path if lock_path and lock_path.is_file() else None)
    done: dict[str, DataSource] = {}
    failed = 0
    for target in _targets(args, env):
        resolved = _resolve(target, args, env, read_lock_path, sample_of)
        for note in resolved.notes:
            print(f"evalkit: {note}", file=sys.stderr)
        if args.action == "path":
            print(resolved.path)
        elif args.action == "pull":
            for part in resolved.parts or (resolved.source,):
                print(f"{target}: {part.uri} @ {part.commit or '-'}: {_checked(len(part.files), resolved.unchecked.get(part.uri, 0))}")
        elif args.action == "verify":
            bad = _verify(resolved)
            failed += len(bad)
            for line in bad:
                print(f"evalkit: {line}", file=sys.stderr)
            if not bad:
                print(f"{target}: {sum(len(p.files) for p in resolved.parts or (resolved.source,))} files verified")
        elif args.action == "lock":
            for part in resolved.parts or (resolved.source,):
                if part.kind in ("hub", "archive"):
                    done[lock_key(part.kind, part.base_uri, part.endpoint)] = part
    if args.action == "lock":
        path = lock_path or Path(LOCK_NAME)
        write_lock(path, done, keep=read_lock(path))
        print(f"{path}: {len(done)} source(s) locked")
    if failed:
        raise EvalkitError(f"{failed} file(s) differ from what was recorded; delete them and pull again")
    return 0
