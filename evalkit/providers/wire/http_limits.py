"""What every provider refuses on the wire: replies past the size cap, and redirects.

The cap counts decompressed bytes, as they are read, so a small gzip body that inflates to
hundreds of megabytes stops at the cap instead of filling memory. Redirects are never followed:
a POST turned into a GET by a 301/302 would be answered by whatever sits at the other end, and
the key headers would travel with it; a 3xx is a permanent error that names where it pointed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from evalkit.core.errors import ProviderError

if TYPE_CHECKING:
    import aiohttp

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
ERROR_BODY_BYTES = 64 * 1024  # enough of an error body for its message; the rest is not read
_READ_CHUNK = 64 * 1024


def too_large(max_bytes: int) -> ProviderError:
    return ProviderError("permanent", f"reply larger than {max_bytes / 2**20:g} MB (--max-response-mb)")


def is_redirect(status: int) -> bool:
    return 300 <= status < 400 and status != 304


def redirect_refused(status: int, location: str | None, request_url: str) -> ProviderError:
    """The error for a 3xx: permanent (the base URL is wrong), naming the origin it pointed to."""
    where = "(no Location)"
    if location:
        target = urlsplit(urljoin(request_url, location))
        host = target.hostname or "?"
        where = f"{target.scheme}://{host}" + (f":{target.port}" if target.port else "")
    return ProviderError("permanent", f"HTTP {status} redirect to {where} not followed; check the base URL",
                         status=status)


async def read_capped(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The whole (decompressed) body, or `too_large` as soon as it passes `max_bytes`."""
    encoded = resp.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
    if not encoded and resp.content_length is not None and resp.content_length > max_bytes:
        resp.close()
        raise too_large(max_bytes)
    chunks: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_chunked(_READ_CHUNK):
        total += len(chunk)
        if total > max_bytes:
            resp.close()  # the rest is never read; the connection is not reused
            raise too_large(max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_prefix(resp: aiohttp.ClientResponse, limit: int = ERROR_BODY_BYTES) -> bytes:
    """At most `limit` bytes of a body whose start is all that matters (an error's message)."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_chunked(_READ_CHUNK):
        chunks.append(chunk[: limit - total])
        total += len(chunks[-1])
        if total >= limit:
            resp.close()
            break
    return b"".join(chunks)
