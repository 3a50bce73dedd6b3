"""Where a `vertex/` model runs (project, location, API root) and the credentials that reach it.

Vertex AI has no API key: requests carry an OAuth 2 access token (`ya29.…`) minted from
application-default credentials (google-auth: the service-account key file named by
GOOGLE_APPLICATION_CREDENTIALS, the file `gcloud auth application-default login` writes, or the
metadata server on Google Cloud). The project and location come from GOOGLE_CLOUD_PROJECT and
GOOGLE_CLOUD_LOCATION, as the google-genai SDK reads them.

The spec carries the place, never the credentials: its base URL is the API root followed by
`/projects/{project}/locations/{location}` (e.g.
`https://us-central1-aiplatform.googleapis.com/projects/my-proj/locations/us-central1`), so the
run's identity, its cache keys and its run directory name say which project and region answered,
and a run in another project or region is another endpoint. `--base-url` (or
GOOGLE_VERTEX_BASE_URL) replaces the API root only.

Light on import: google-auth is imported when credentials are loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from evalkit.core.errors import EvalkitError, server_reason

PROJECT_ENV = "GOOGLE_CLOUD_PROJECT"
LOCATION_ENV = "GOOGLE_CLOUD_LOCATION"
CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_PLACE = "/projects/"
_MULTI_REGIONS = ("us", "eu")  # served from aiplatform.{us,eu}.rep.googleapis.com


@dataclass(frozen=True)
class Place:
    """The API root, project and location a `vertex/` spec's base URL names."""

    root: str
    project: str
    location: str


def default_root(location: str) -> str:
    """Vertex AI's API root for a location (as both SDKs choose it: global, multi-region, region)."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    if location in _MULTI_REGIONS:
        return f"https://aiplatform.{location}.rep.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def _setting(env: Mapping[str, str], name: str, label: str) -> str:
    value = (env.get(name) or "").strip()
    if not value:
        raise EvalkitError(f"{name} is not set (needed for {label}: the Google Cloud "
                           f"{'project' if name == PROJECT_ENV else 'location, e.g. us-central1 or global'})")
    if "/" in value or any(c.isspace() for c in value):
        raise EvalkitError(f"{name} '{value}' is not a Google Cloud {'project' if name == PROJECT_ENV else 'location'}"
                           f" (needed for {label})")
    return value


def _placed(url: str) -> bool:
    """The URL already names a project and location (an endpoint as a run's config.json records it)."""
    root, sep, rest = url.rstrip("/").rpartition(_PLACE)
    project, _, location = rest.partition("/locations/")
    return bool(sep and root and project and location and "/" not in location)


def locate(urls: Sequence[str], env: Mapping[str, str], label: str = "vertex/") -> tuple[str, ...]:
    """The spec's base URLs: each API root (the default one for the location without --base-url) with
    the project and location after it; a URL that names them already is kept. EvalkitError naming the
    variable that is missing."""
    if urls and all(_placed(u) for u in urls):
        return tuple(u.rstrip("/") for u in urls)
    project = _setting(env, PROJECT_ENV, label)
    location = _setting(env, LOCATION_ENV, label)
    roots = [u.rstrip("/") for u in urls if not _placed(u)] or [default_root(location)]
    placed = [u.rstrip("/") for u in urls if _placed(u)]
    return (*placed, *(f"{r}{_PLACE}{quote(project, safe='')}/locations/{quote(location, safe='')}" for r in roots))


def place_of(url: str) -> Place:
    """A spec's base URL taken apart again (`locate` made it)."""
    root, sep, rest = url.rpartition(_PLACE)
    project, _, location = rest.partition("/locations/")
    if not sep or not project or not location:
        raise EvalkitError(f"vertex/: '{url}' names no project and location")
    return Place(root, unquote(project), unquote(location))


def load_credentials(env: Mapping[str, str], label: str) -> Any:
    """Application-default credentials, scoped for Vertex AI (not yet refreshed: no network here).

    GOOGLE_APPLICATION_CREDENTIALS in `env` names the key file (read from `env`, which may not be the
    process's environment); without it, google-auth's own search (gcloud's file, the metadata server).
    """
    from evalkit.core.sdk import import_sdk

    auth = import_sdk("google.auth", label)  # lazy: only when a vertex/ model is asked
    from google.auth import exceptions

    path = env.get(CREDENTIALS_ENV)
    try:
        if path:
            credentials = _from_file(auth, path, label)
        else:
            credentials, _ = auth.default(scopes=[SCOPE])
    except (exceptions.DefaultCredentialsError, ValueError) as e:
        where = f"{CREDENTIALS_ENV} ({path})" if path else "application-default credentials"
        raise EvalkitError(f"{label}: no usable Google Cloud credentials from {where}: {_first_line(e)}; "
                           f"set {CREDENTIALS_ENV} to a service-account key file, or run "
                           "`gcloud auth application-default login`") from None
    return credentials


def _from_file(auth: Any, path: str, label: str) -> Any:
    """The credentials a key file holds: a service account's or a user's (gcloud's file) read as that type;
    any other kind (workload identity federation) through google-auth's general loader."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except OSError as e:
        raise EvalkitError(f"{label}: {CREDENTIALS_ENV} ({path}) cannot be read: {e.strerror or e}") from None
    except ValueError:
        raise EvalkitError(f"{label}: {CREDENTIALS_ENV} ({path}) is not a JSON key file") from None
    kind = info.get("type") if isinstance(info, dict) else None
    if kind == "service_account":
        from google.oauth2 import service_account

        return service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
    if kind == "authorized_user":
        from google.oauth2 import credentials

        return credentials.Credentials.from_authorized_user_info(info, scopes=[SCOPE])
    return auth.load_credentials_from_file(path, scopes=[SCOPE])[0]


def _first_line(e: BaseException) -> str:
    """An exception's message, one line, without a key's contents (google-auth names files, not keys)."""
    return server_reason(e)


def credential_secrets(credentials: Any) -> list[str]:
    """What of a credential must never be written: the access token, a service account's private key id (its
    key is never in a message, but its id names it), a user's refresh token and client secret (gcloud's file)."""
    out = [getattr(credentials, name, None) for name in ("token", "private_key_id", "_private_key_id", "refresh_token",
                                                          "_refresh_token", "client_secret", "_client_secret")]
    return [s for s in out if isinstance(s, str) and s]
