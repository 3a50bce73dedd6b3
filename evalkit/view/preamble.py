"""The distinctive part of each question, for the samples list: a preamble many questions share is cut.

RGB-Th-Bench's prompts open with one of two long fixed instructions; where its questions are shown
from the records (the data could not be loaded), a row's two lines held only that instruction and
every row looked the same. A preamble here is a start of at least LEAST characters that at least
SHARE of the distinct question texts (and never fewer than three) begin with. It is cut at its last
line break, else at its last space, so the question's own first words stay; the row shows an
ellipsis in its place and the question's page shows the full text.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

LEAST = 60  # characters: ordinary questions seldom share a start this long, instructions do
SHARE = 0.05  # of the distinct texts
ELLIPSIS = "\u2026"


def preamble_lengths(texts: Sequence[str], least: int = LEAST, share: float = SHARE) -> dict[str, int]:
    """text -> how many leading characters are a shared preamble (texts without one are left out)."""
    distinct = sorted(set(texts))
    group = max(3, int(share * len(distinct) + 0.999))
    if len(distinct) < group:
        return {}
    lcp = [_common(a, b) if a[:least] == b[:least] else 0 for a, b in zip(distinct, distinct[1:], strict=False)]
    if max(lcp, default=0) < least:  # the usual case: no start that long is shared at all
        return {}
    shared = _best_window_minimum(lcp, group - 1)
    out: dict[str, int] = {}
    for text, n in zip(distinct, shared, strict=True):
        cut = _boundary(text, n) if n >= least else 0
        if cut >= least and text[cut:].strip():
            out[text] = cut
    return out


def distinctive(text: str, cut: int) -> str:
    """The text after its preamble, marked with an ellipsis (the text itself when cut is 0)."""
    return ELLIPSIS + text[cut:].lstrip() if cut else text


def _common(a: str, b: str) -> int:
    """The length of the start two texts share (a binary search over slices: C compares, not a Python loop)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _boundary(text: str, n: int) -> int:
    """Where a shared start of n characters ends at a line break, else at a space (0: nowhere)."""
    head = text[:n]
    line = head.rfind("\n")
    if line >= 0:
        return line + 1
    space = max(head.rfind(" "), head.rfind("\t"))
    return space + 1 if space >= 0 else 0


def _best_window_minimum(lcp: Sequence[int], width: int) -> list[int]:
    """For each of the len(lcp)+1 sorted texts: the longest start it shares with `width` neighbours in a
    row (the largest minimum of `width` consecutive neighbour prefixes among the windows that hold it)."""
    n = len(lcp) + 1
    if width < 1 or len(lcp) < width:
        return [0] * n
    window = _sliding(lcp, width, lowest=True)  # window k: texts k .. k+width share window[k] characters
    padded = [0] * width + window + [0] * width
    return _sliding(padded, width + 1, lowest=False)[:n]


def _sliding(values: Sequence[int], width: int, *, lowest: bool) -> list[int]:
    """The minimum (or maximum) of each run of `width` consecutive values, in one pass (a monotone queue)."""
    out: list[int] = []
    queue: deque[int] = deque()
    for i, v in enumerate(values):
        while queue and (values[queue[-1]] >= v if lowest else values[queue[-1]] <= v):
            queue.pop()
        queue.append(i)
        if queue[0] <= i - width:
            queue.popleft()
        if i >= width - 1:
            out.append(values[queue[0]])
    return out
