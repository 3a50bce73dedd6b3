"""Where a query's answer is in the cache: the query fitted to the provider's documented image limits,
its request key (and the keys earlier versions stored it under), the lookup, and on a miss the
images to send.

Kept apart from the runner, which decides when to look and what to send: this is plain thread work
(reading image headers, hashing, the sqlite cache), called from the runner's threads and the feed's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from evalkit.ask.feed import Looked
from evalkit.ask.request_key import request_key
from evalkit.ask.store.cache import CacheLike
from evalkit.core.types import ImagePart, Message, Query
from evalkit.images.pipeline import ImagePipeline, PreparedImage
from evalkit.images.provider_limits import (
    check_image_count,
    check_request_bytes,
    fit_transform,
    prepare_within,
)
from evalkit.providers.base import ProviderSpec
from evalkit.providers.registry import limits_for


class CacheLookup:
    """One provider's request keys and cache lookups (see the module docstring)."""

    def __init__(self, spec: ProviderSpec, cache: CacheLike, pipeline: ImagePipeline, *, fingerprints: bool):
        self.spec = spec
        self.cache = cache
        self.pipeline = pipeline
        self.fingerprints = fingerprints
        # the endpoint in request keys, spelled once (not per request), and earlier versions' spellings
        # where they differ
        self._endpoint = spec.endpoint
        self._earlier = spec.earlier_endpoints
        lim = limits_for(spec.provider, spec.model)  # none documented: images as they are
        self.limits = lim if lim and (lim.max_side or lim.max_pixels or lim.max_bytes or lim.max_images) else None

    def fit(self, query: Query) -> Query:
        """The query with each image's transform tightened to the provider's documented limits
        (reads image headers only). Servers without limits get the query unchanged."""
        parts = query.image_parts()
        if self.limits is None or not parts:
            return query
        check_image_count(self.limits, len(parts), f"query {query.id}")

        def fitted(part: ImagePart) -> ImagePart:
            h = self.pipeline.header(part.ref)
            t = fit_transform(self.limits, part.transform, h.width, h.height, mime=h.mime, nbytes=h.nbytes)
            return part if t == part.transform else ImagePart(part.ref, t)

        messages = tuple(Message(m.role, tuple(fitted(p) if isinstance(p, ImagePart) else p for p in m.parts))
                         for m in query.messages)
        return replace(query, messages=messages)

    def key_of(self, query: Query) -> str:
        """The cache key of a query as it will be sent (after fitting provider limits)."""
        return self.key(self.fit(query))

    def keys_of(self, query: Query) -> tuple[str, ...]:
        """Every key an answer to `query` may be stored under: today's, then 0.2's and 0.1.0's where the
        endpoint was spelled differently then (see ProviderSpec.earlier_endpoints)."""
        fitted = self.fit(query)
        return (self.key(fitted), *(self.key(fitted, e) for e in self._earlier))

    def key(self, fitted: Query, endpoint: str | None = None) -> str:
        """The request key of a fitted query, under today's endpoint spelling or the one given."""
        spec = self.spec
        return request_key(provider=spec.provider, model=spec.model, endpoint=endpoint or self._endpoint,
                           params=fitted.params, messages=fitted.messages, source_hash=self.pipeline.source_hash)

    def _get_earlier(self, fitted: Query, key: str) -> tuple[str, dict | None]:
        """A miss under today's key may be an earlier version's answer under the endpoint as spelled then."""
        for endpoint in self._earlier:
            old = self.key(fitted, endpoint)
            hit = self.cache.get(old)
            if hit is not None:
                return old, hit
        return key, None

    def prepare(self, query: Query) -> list[PreparedImage]:
        """Encoded images within the provider's limits (stepping quality/size down for bytes)."""
        parts = query.image_parts()
        if self.limits is None:
            return [self.pipeline.prepare(p) for p in parts]
        out = [prepare_within(lambda t, p=p: self.pipeline.prepare(ImagePart(p.ref, t)), p.transform, self.limits,
                              p.ref.describe(), n_images=len(parts))[0] for p in parts]
        check_request_bytes(self.limits, sum(len(i.data) for i in out), f"query {query.id}")
        return out

    def lookup(self, query: Query, missed: str | None, look_again: bool) -> tuple[
            str, dict | None, list[str], list[PreparedImage]]:
        """Thread work: key, cache lookup, fingerprints, and (on a miss) the prepared images.
        `missed` is the key of a query the feed already looked up and did not find; `look_again`:
        look in the cache all the same (an answer may have been stored since)."""
        query = self.fit(query)
        key = missed or self.key(query)
        hit = self.cache.get(key) if look_again else None
        if hit is None and missed is None:
            key, hit = self._get_earlier(query, key)
        parts = query.image_parts()
        if hit is not None:
            return key, hit, self.hit_fps(parts, hit), []
        prepared = self.prepare(query)  # first: its decode also fingerprints
        fps = [self.pipeline.fingerprint(p) for p in parts] if self.fingerprints else []
        return key, hit, fps, prepared

    def hit_fps(self, parts: Sequence[ImagePart], hit: dict) -> list[str]:
        """Fingerprints of a cached query's images: stored with the answer, else computed (a decode)."""
        if not self.fingerprints:
            return []
        stored = hit.get("image_fps")
        if isinstance(stored, list) and len(stored) == len(parts) and all(isinstance(f, str) for f in stored):
            return stored
        return [self.pipeline.fingerprint(p) for p in parts]

    def _get_many(self, keys: list[str]) -> dict[str, dict]:
        get_many = getattr(self.cache, "get_many", None)
        if get_many is not None:
            return get_many(keys)
        return {k: v for k in keys if (v := self.cache.get(k)) is not None}

    def lookup_many(self, queries: Sequence[Query]) -> list[Looked]:
        """Thread work for a chunk of queries: keys, one batched cache lookup, the hits' fingerprints.
        A query whose lookup fails (an unreadable image) gets None: ask() reports its error."""
        fitted: list[Query | None] = []
        keys: list[str] = []
        for q in queries:
            try:
                f = self.fit(q)
                keys.append(self.key(f))
                fitted.append(f)
            except Exception:  # noqa: BLE001 - ask() raises it again, for this query alone
                keys.append("")
                fitted.append(None)
        hits = self._get_many(list(dict.fromkeys(k for k in keys if k)))
        for endpoint in self._earlier:  # misses may be earlier versions' answers, the endpoint spelled as then
            old = {i: self.key(f, endpoint) for i, (f, k) in enumerate(zip(fitted, keys, strict=True))
                   if f is not None and k not in hits}
            if not old:
                break
            found = self._get_many(list(dict.fromkeys(old.values())))
            for i, earlier in old.items():
                if earlier in found:
                    keys[i] = earlier
                    hits[earlier] = found[earlier]
        out: list[Looked] = []
        for f, key in zip(fitted, keys, strict=True):
            if f is None:
                out.append(None)
                continue
            hit = hits.get(key)
            try:
                out.append((key, hit, self.hit_fps(f.image_parts(), hit) if hit is not None else []))
            except Exception:  # noqa: BLE001 - as above
                out.append(None)
        return out
