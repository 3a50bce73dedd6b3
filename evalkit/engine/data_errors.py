"""Items whose data failed while they were asked (an image that cannot be read): what the run says.

Such an item was never sent; a re-run reads the same bytes and fails the same way, so "re-run to
ask the failed queries again" is the wrong advice. The run answers every other item, leaves these
out of every metric (summary.json `data_errors`), and ends with one line naming them and the fix:
exit 2, as for any input the user must change. A benchmark with `--skip-missing` (IF-Bench) skips
them under that flag, as it skips a missing image file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.core.types import Item
from evalkit.lint.items import item_place

LISTED = 5  # items named in the line before "and N more"


def place(item: Item | None) -> str:
    """Where an item is in its data ("data.tsv row 4"), as lint names it, or ""."""
    if item is None:
        return ""
    file, where = item_place(item)
    return " ".join(x for x in (Path(file).name if file else None, where) if x)


def closing_line(bench: str, data: Path | str, digest: Mapping[str, Any], items: Mapping[str, Item], *,
                 can_skip: bool) -> str:
    """The one line a run with data errors ends with: the items (with their place), the first cause, the fix."""
    ids: list[str] = list(digest["items"])
    named = []
    for item_id in ids[:LISTED]:
        where = place(items.get(item_id))
        named.append(f"{item_id} ({where})" if where else item_id)
    more = f" and {len(ids) - LISTED:,} more" if len(ids) > LISTED else ""
    n = len(ids)
    cause = digest["causes"][0]["cause"] if digest.get("causes") else "unreadable image"
    skip = ", or add --skip-missing to leave such items out" if can_skip else ""
    return (f"{n:,} item{'s' if n != 1 else ''} not asked, {'their images' if n != 1 else 'its image'} cannot be "
            f"read: {', '.join(named)}{more} (first: {cause}); a re-run reads the same bytes: `evalkit lint {bench} "
            f"--data {data}` lists every broken image; repair or drop {'them' if n != 1 else 'it'}{skip}")
