"""`--shard K/N`: which deterministic 1/N of a benchmark's items one process asks.

An item belongs to shard `sha256(item id) mod N` (0-based, so `--shard K/N` holds the items of
residue K-1): the same on every machine, Python version and process (Python's `hash()` of a string
is salted per process), and independent of the items' order or count, so growing a data set moves
no existing item to another shard. Every variant of an item (option shifts, rotations, languages)
carries the item's id, so a shard holds whole items and the consistency metrics stay whole.

Stdlib only: the settings validate the flag before anything heavy is imported.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from evalkit.core.errors import EvalkitError
from evalkit.core.types import Item

_FORM = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """The K-th (1-based) of N parts of the items."""

    k: int
    n: int

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"

    def holds(self, item_id: str) -> bool:
        return shard_index(item_id, self.n) == self.k - 1


def shard_index(item_id: str, n: int) -> int:
    """The 0-based shard of an item among n: the first 8 bytes of sha256(id) as an integer, mod n."""
    digest = hashlib.sha256(str(item_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n


def items_in(shard: str | None, items: Iterable[Item]) -> int:
    """How many of `items` a run with this `--shard` value (None: unsharded) asks."""
    if shard is None:
        return sum(1 for _ in items)
    part = parse_shard(shard)
    return sum(1 for item in items if part.holds(item.id))


def parse_shard(value: str, flag: str = "--shard") -> Shard:
    """"K/N" with 1 <= K <= N; anything else is a one-line error naming the flag."""
    match = _FORM.fullmatch(str(value))
    if match is None:
        raise EvalkitError(f"{flag} must be K/N (1-based: the K-th of N parts, e.g. 2/4), not {value!r}")
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise EvalkitError(f"{flag} {value}: K must be between 1 and N (N at least 1), e.g. 1/{max(n, 1)} to "
                           f"{max(n, 1)}/{max(n, 1)}")
    return Shard(k, n)
