"""Prompt-cache-friendly order: questions on the same image run back to back.

Providers cache a prompt's prefix (the image comes first in every evalkit prompt), but only
once a request carrying it has been processed. So within a window of image groups the
first query of each group ("primer") goes out first, and the group's other queries follow
after it; the runner holds them until their primer is answered (see Runner.run).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

from evalkit.core.types import ImageRef, Query


def image_group(query: Query) -> Hashable | None:
    """The identity of a query's image prefix (its images' sources and transforms), or None."""
    parts = query.image_parts()
    if not parts:
        return None
    return tuple((_ref_key(p.ref), p.transform) for p in parts)


def _ref_key(ref: ImageRef) -> Hashable:
    return (ref.kind, ref.value if ref.kind == "path" else hash(ref.value))


def group_by_image(queries: Sequence[Query], window: int) -> Iterator[Query]:
    """Queries grouped by image prefix, primers of `window` groups first, then their followers."""
    groups: dict[Hashable, list[Query]] = {}
    loose: list[Query] = []
    for q in queries:
        key = image_group(q)
        if key is None:
            loose.append(q)
        else:
            groups.setdefault(key, []).append(q)
    ordered = list(groups.values())
    for start in range(0, len(ordered), max(1, window)):
        batch = ordered[start:start + window]
        for g in batch:
            yield g[0]
        for g in batch:
            yield from g[1:]
    yield from loose
