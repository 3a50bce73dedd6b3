"""Pillow's decompression-bomb warning, said as evalkit's own line.

Pillow warns (DecompressionBombWarning) when an image holds more pixels than Image.MAX_IMAGE_PIXELS
(about 89 million) and refuses it past twice that. The warning reached the user raw — a
site-packages path, a line of Pillow's code, nothing about which image or what to do. Pillow's
warning is silenced (that category only), and the pipeline says instead, once per image, which
image it is, how many pixels it has and what to do; the image is still used, as before.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_quiet = False
_said: set[str] = set()  # images already named in this process
_SAID_MAX = 10_000


def quiet_pillow_warning() -> None:
    """Silence Pillow's own DecompressionBombWarning (once per process; check() says it instead)."""
    global _quiet
    if _quiet:
        return
    from PIL import Image

    with _lock:
        if not _quiet:
            warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
            _quiet = True


def check(img: Any, what: str, note: Callable[[str], None] | None = None) -> None:
    """Say once that the opened image `img` (named `what`) is over Pillow's decompression-bomb limit."""
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    pixels = img.width * img.height
    if not limit or pixels <= limit:
        return
    with _lock:
        if what in _said:
            return
        if len(_said) >= _SAID_MAX:
            _said.clear()
        _said.add(what)
    message = (f"image {what} has {pixels:,} pixels, more than Pillow's decompression-bomb limit of {limit:,}: "
               f"it is decoded all the same (about {pixels * 3 / 2**20:,.0f} MB of memory); if it is not meant to "
               "be that large, replace it with a smaller copy")
    if note is not None:
        note(message)
    else:
        print(f"evalkit: {message}", file=sys.stderr)
