"""Many items on one image: lint and a run's start are linear in the items (issue 31 item 10).

`lint.images.collect` asked `item id not in use.items` (a list) for every item: 100,000 questions
on one picture made 5 * 10^9 string comparisons, 141 s of `evalkit lint` and as long again before
a run's first request. The comparisons are counted here (an id type that counts its `==`), not timed.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from evalkit.core.types import ImageRef, Item
from evalkit.lint import images
from evalkit.lint.engine import check_items


class CountingId(str):
    """An item id that counts how often it is compared for equality."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountingId.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _items(n: int, image: ImageRef, *, ids: type[str] = str) -> list[Item]:
    return [Item(ids(f"q{i}"), f"Question {i}: which colour?", {"A": "red", "B": "blue", "C": "green", "D": "grey"},
                 "ABCD"[i % 4], (image,), meta={"source": "data.jsonl", "line": i + 1}) for i in range(n)]


def test_collect_compares_each_item_a_bounded_number_of_times():
    n = 3000  # the list test made n * (n - 1) / 2 = 4.5 million comparisons
    items = _items(n, ImageRef.from_path("/data/one.png"), ids=CountingId)
    CountingId.compared = 0
    uses = images.collect(items)
    assert CountingId.compared <= 2 * n
    (use,) = uses.values()
    assert use.items == [f"q{i}" for i in range(n)]


def test_an_item_showing_one_image_twice_is_listed_once():
    ref = ImageRef.from_path("/data/one.png")
    item = Item("q0", "Which?", {"A": "x", "B": "y"}, "A", (ref, ref))
    other = Item("q1", "Which?", {"A": "x", "B": "y"}, "B", (ref, ImageRef.from_path("/data/two.png")))
    uses = images.collect([item, other])
    assert [u.items for u in uses.values()] == [["q0", "q1"], ["q1"]]


def test_thirty_thousand_items_on_one_picture_lint_fully(tmp_path: Path):
    picture = tmp_path / "one.png"
    Image.new("RGB", (48, 48), (200, 30, 30)).save(picture)
    n = 30_000
    found, n_images = check_items("mcq", _items(n, ImageRef.from_path(str(picture))))
    assert n_images == 1
    (shared,) = [f for f in found if f.kind == "image-shared"]
    assert f"shown by {n} items that do not refer to each other: q0, q1" in shared.message
    assert f"and {n - 8} more" in shared.message
    assert len(shared.items) == n
    assert not [f for f in found if f.severity == "error"]
