"""What a base URL may hold, checked at setup so a run that could never send fails before anything is written.

A base URL is where evalkit adds its own routes (`/chat/completions`, `/models`, Azure's
`?api-version=`): a query string or fragment in it would end up in the middle of every request URL
(`…/v1?key=…/chat/completions`, a 404 on every query) and, being part of the URL, in the run's
config, summary and report. It is refused with one line that never repeats what follows the `?`
(often a key); the key belongs in the provider's key variable.

Credentials in a base URL (`http://user:pass@host`) are sent as Basic auth in the `Authorization`
header. The OpenAI-style clients send their key (or Azure's Microsoft Entra ID token) in the same
header, so the two cannot both be given: refused at setup, naming both, instead of every request
failing unsent.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from evalkit.core.errors import EvalkitError
from evalkit.providers.base import ProviderSpec
from evalkit.providers.registry import info


def url_flag(flag: str) -> str:
    """The flag a spec's base URLs came from: --judge's are --judge-base-url's, the others --base-url's."""
    return "--judge-base-url" if flag == "--judge" else "--base-url"


def shown_without_query(url: str) -> str:
    """`scheme://host[:port]/path?…`: the URL without `user:pass@` and without what follows its first `?`
    or `#`. The authority runs to the first `/` (a password may hold `?` or `#`), so neither shows."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    tail = authority.rpartition("@")[2] + slash + path
    cut = min((i for i in (tail.find("?"), tail.find("#")) if i >= 0), default=len(tail))
    return f"{scheme}{sep}{tail[:cut + 1]}…" if cut < len(tail) else f"{scheme}{sep}{tail}"


def check_no_query(spec: ProviderSpec, flag: str) -> None:
    """No base URL of `spec` holds a query string or a fragment (even an empty one): else EvalkitError."""
    record = info(spec.provider)
    for url in spec.base_urls:
        if "?" in url or "#" in url:
            where = f"{url_flag(flag)} or {record.base_url_env}"
            hint = (f"{record.name}/ adds ?api-version= itself from --api-version" if record.takes_api_version
                    else f"a key goes in {record.key_env[0]}")
            shown = shown_without_query(url)
            raise EvalkitError(f"{flag} {spec.label}: base URL '{shown}' has a query string or fragment, "
                               f"which evalkit would put in the middle of every request URL; give the "
                               f"server's URL without it ({where}); {hint}")


def has_userinfo(url: str) -> bool:
    """The URL carries `user[:password]@` (sent as Basic auth)."""
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:  # check_setup names a URL that does not parse
        return False


def check_one_authorization(spec: ProviderSpec, key: str | None, flag: str) -> None:
    """URL credentials and a key sent as `Authorization: Bearer` (chat completions; Azure without its
    key, which then signs in with an Entra ID token as a bearer) cannot share one header: else
    EvalkitError."""
    record = info(spec.provider)
    bearer = bool(key) if record.wire == "chat-completions" else record.wire == "azure-openai" and not key
    if not bearer or not any(has_userinfo(u) for u in spec.base_urls):
        return
    var = record.key_env[0]
    sent = f"{var} is set" if key else f"{record.name}/ without {var} signs in with a Microsoft Entra ID token"
    other = "" if record.key_required else f", or {'unset' if key else 'set'} {var}"
    raise EvalkitError(f"{flag} {spec.label}: the base URL carries user:password@ (sent as Basic auth) and "
                       f"{sent} (sent as a bearer token), but both go in the one Authorization header: give "
                       f"the URL without user:password@ ({url_flag(flag)} or {record.base_url_env}){other}")
