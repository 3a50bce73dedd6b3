"""Simulated automatic prompt caching, following OpenAI's documented rule.

OpenAI caches prompt prefixes automatically once a prompt is 1,024 tokens or longer; a later
request whose prompt starts with a cached prefix reports the hit as `cached_tokens`, counted
in 128-token steps above the first 1,024. Images count by the provider's token formula
(85 + 170 per 512-pixel tile after fitting 2048x2048 and a 768 shortest side).

The simulator cuts a prompt into chunks — each image, and each line of text — and compares
prefixes at chunk boundaries (real servers compare token by token; chunk granularity is close
enough for testing the scheduler and the accounting, and is stated here so no one mistakes it
for the real thing). Entries expire after `ttl_s` (OpenAI: 5-10 minutes of inactivity).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

MIN_PREFIX = 1024
STEP = 128


def server_openai_image_tokens(width: int, height: int) -> int:
    s = min(1.0, 2048 / max(width, height))
    w, h = width * s, height * s
    s = min(1.0, 768 / min(w, h))
    return 85 + 170 * math.ceil(w * s / 512) * math.ceil(h * s / 512)


def prompt_chunks(messages: Sequence[Any], image_sizes: Sequence[tuple[int, int]]) -> list[tuple[str, int]]:
    """(identity, tokens) of each chunk of an OpenAI `messages` list, in order."""
    chunks: list[tuple[str, int]] = []
    sizes = iter(image_sizes)
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        chunks.append((f"role:{msg.get('role')}", 1))
        for part in parts:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "image_url":
                ref = part.get("image_url")
                url = ref.get("url", "") if isinstance(ref, dict) else str(ref)
                w, h = next(sizes, (512, 512))
                chunks.append(("img:" + hashlib.sha1(url.encode()).hexdigest(), server_openai_image_tokens(w, h)))
            elif isinstance(part.get("text"), str):
                for line in part["text"].splitlines(keepends=True):
                    chunks.append(("txt:" + line, max(1, math.ceil(len(line) / 4))))
    return chunks


class PrefixCache:
    """Prefixes seen by one server (bounded, with a time to live)."""

    def __init__(self, ttl_s: float = 600.0, max_entries: int = 200_000,
                 clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def lookup_and_store(self, chunks: Sequence[tuple[str, int]], ready_in: float = 0.0) -> int:
        """Cached tokens for this prompt (looked up on arrival), then remember its cacheable
        prefixes as usable `ready_in` seconds from now — once the request has been processed,
        so concurrent requests with one prefix all miss, as they do on a real server."""
        now = self._clock()
        h = hashlib.sha256()
        total = cached = 0
        boundaries: list[str] = []
        for ident, tokens in chunks:
            h.update(ident.encode("utf-8", "replace") + b"\x00")
            total += tokens
            if total < MIN_PREFIX:
                continue
            key = f"{h.hexdigest()}:{total}"
            boundaries.append(key)
            ready = self._seen.get(key)
            if ready is not None and ready <= now <= ready + self.ttl_s:
                cached = total
        for key in boundaries:
            if key not in self._seen or self._seen[key] > now:
                self._seen[key] = now + ready_in
            else:
                self._seen[key] = max(self._seen[key], now)  # a hit refreshes the time to live
            self._seen.move_to_end(key)
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)
        if cached < MIN_PREFIX:
            return 0
        return MIN_PREFIX + (cached - MIN_PREFIX) // STEP * STEP
