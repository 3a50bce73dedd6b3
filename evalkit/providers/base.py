"""The provider interface: translate a request, send it, classify what went wrong.

Providers are deliberately thin. Retries, rate limits, caching and accounting live in
the runner; a provider only knows its wire format and its error vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from evalkit.providers.registry import find

if TYPE_CHECKING:
    from evalkit.core.types import GenParams, Message, Response
    from evalkit.images.pipeline import PreparedImage


@dataclass(frozen=True)
class ProviderSpec:
    """A parsed `--model provider/name` plus where to reach it."""

    provider: str
    model: str
    base_urls: tuple[str, ...] = ()
    cache_tag: str | None = None  # stands in for the endpoint in the cache key (e.g. a moved server)
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    service: str | None = None  # `openai-compatible/<service>/<model>`: the service as typed, whose variables hold
    #                              the key and URL (providers/openai/service.py); never in a key or identity

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def endpoint(self) -> str:
        """Cache identity of the endpoint: the sorted set of base URLs (replicas are one endpoint), each
        without credentials and in one spelling (`http://h:8000/` = `http://h:8000/v1` for the servers
        that speak chat completions), so they never reach a record and one server is one endpoint."""
        if self.cache_tag:
            return f"tag:{self.cache_tag}"
        return ",".join(sorted({canonical_url(self.provider, u) for u in self.base_urls}))

    @property
    def case_kept_endpoint(self) -> str:
        """The endpoint as evalkit 0.2 spelled it: today's, but the scheme and host in the case typed
        (`http://GPU1:8000/v1`); its cache keys and run directories are still found under it."""
        if self.cache_tag:
            return f"tag:{self.cache_tag}"
        return ",".join(sorted({canonical_url(self.provider, u, fold_case=False) for u in self.base_urls}))

    @property
    def legacy_endpoint(self) -> str:
        """The endpoint as evalkit 0.1.0 spelled it (the URLs as typed): its cache keys and run
        directories are still found under it."""
        if self.cache_tag:
            return f"tag:{self.cache_tag}"
        return ",".join(sorted(self.base_urls))

    @property
    def earlier_endpoints(self) -> tuple[str, ...]:
        """The spellings earlier versions keyed this endpoint's answers under, where they differ from
        today's: 0.2's (`case_kept_endpoint`), then 0.1.0's (`legacy_endpoint`)."""
        spellings = dict.fromkeys((self.case_kept_endpoint, self.legacy_endpoint))
        return tuple(e for e in spellings if e != self.endpoint)


def public_url(url: str) -> str:
    """`url` without `user:password@` (credentials never enter a record, config or report)."""
    parts = _split(url)
    if parts is None:
        return url
    scheme, host, path = parts
    return f"{scheme}://{host.rpartition('@')[2]}{path}"


def _split(url: str) -> tuple[str, str, str] | None:
    """(scheme, host with any userinfo, "/path" or ""), or None for a URL without a scheme."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    host, slash, path = rest.partition("/")
    return scheme, host, slash + path


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def canonical_url(provider: str, url: str, *, fold_case: bool = True) -> str:
    """One spelling per server: no credentials, no trailing slash, the scheme and host in lower case
    (both are case-insensitive; the path is not), and `/v1` where a chat-completions server's URL has
    no path (the clients add it: both spellings reach the same server); an Azure resource without the
    `/openai[/v1]` its portal may show. `fold_case=False`: 0.2's spelling, the case kept as typed."""
    url = public_url(url).rstrip("/")
    if fold_case:
        url = _lower_host(url)
    record = find(provider)
    if record is not None and record.wire == "azure-openai":
        return azure_endpoint(url)
    if record is not None and record.wire == "chat-completions" and "://" in url and "/" not in url.split("://", 1)[1]:
        url += "/v1"
    return url


def _lower_host(url: str) -> str:
    """`HTTP://GPU1:8000/V1` -> `http://gpu1:8000/V1`: ASCII letters only, as DNS folds them."""
    parts = _split(url)
    if parts is None:
        return url
    scheme, host, path = parts
    return f"{scheme.translate(_ASCII_LOWER)}://{host.translate(_ASCII_LOWER)}{path}"


_AZURE_SUFFIXES = ("/openai/v1", "/openai")  # what users paste from the Azure portal after the resource URL


def azure_endpoint(url: str) -> str:
    """An Azure OpenAI resource URL (`https://NAME.openai.azure.com`), given with or without `/openai[/v1]`."""
    url = url.rstrip("/")
    for suffix in _AZURE_SUFFIXES:
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


class Provider(Protocol):
    spec: ProviderSpec

    async def complete(
        self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]
    ) -> Response:
        """Send one request. `images` are the prepared images in the order the ImageParts appear.

        Returns a Response (text may be empty) or raises ProviderError with a kind.
        """
        ...

    def describe_params(self, params: GenParams) -> dict:
        """The generation values actually sent (for the run's config)."""
        ...

    async def close(self) -> None: ...
