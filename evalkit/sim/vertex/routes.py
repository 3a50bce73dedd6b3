"""What Vertex AI checks before it reads a body, its token endpoint, and its publisher-model lookup.

- `POST /token`: Google's OAuth 2 token endpoint for a service account's JWT-bearer grant
  (evalkit.sim.machinery.accounts checks the assertion against SimConfig.google_accounts): an access
  token `ya29.…` valid for an hour, or 400 `invalid_grant`, as oauth2.googleapis.com answers.
- Every Vertex route (`/v1[beta1]/projects/…`, `/v1[beta1]/publishers/…`) needs
  `Authorization: Bearer` with a token this server issued (with no accounts configured: any bearer
  token): else 401 UNAUTHENTICATED in Google's words. A token of an account without a Vertex AI role
  is 403 PERMISSION_DENIED.
- `GET /v1[beta1]/publishers/{google|anthropic}/models/{model}`: the publisher model (the preflight's
  free call); 404 NOT_FOUND for a name it does not serve (strict_model).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from evalkit.sim.extension import route_path
from evalkit.sim.machinery.accounts import BadAssertion, ServiceAccount, verify_assertion
from evalkit.sim.machinery.state import SIM_OWNER, STATE, SimConfig
from evalkit.sim.vertex.wire import google_error

TOKEN_ROUTE = "/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_LIFETIME_S = 3599
_PREFIXES = tuple(f"/{v}/{what}/" for v in ("v1", "v1beta1") for what in ("projects", "publishers"))
UNAUTHENTICATED = ("Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                   "other valid authentication credential. See "
                   "https://developers.google.com/identity/sign-in/web/devconsole-project.")


@dataclass
class Tokens:
    """The access tokens one server issued: token -> (account, expiry); `issued` counts the grants."""

    by_token: dict[str, tuple[ServiceAccount, float]] = field(default_factory=dict)
    issued: int = 0

    def issue(self, account: ServiceAccount) -> str:
        token = "ya29.sim-" + secrets.token_urlsafe(32)
        self.by_token[token] = (account, time.time() + TOKEN_LIFETIME_S)
        self.issued += 1
        return token

    def account(self, token: str) -> ServiceAccount | None:
        found = self.by_token.get(token)
        return found[0] if found is not None and found[1] > time.time() else None


TOKENS = web.AppKey("vertex_tokens", Tokens)


def owns(request: web.Request) -> bool:
    """A Vertex route or the token endpoint (or a twin of one): its credentials are checked here."""
    path = route_path(request)
    return path.startswith(_PREFIXES) or path == TOKEN_ROUTE


def _bearer(request: web.Request) -> str | None:
    value = request.headers.get("Authorization", "")
    return value[7:].strip() or None if value[:7].lower() == "bearer " else None


def vertex_gate(config: SimConfig) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Middleware: Vertex's 401 without an issued bearer token, its 403 for an account without a role."""

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        path = route_path(request)
        if not path.startswith(_PREFIXES):
            return await handler(request)
        token = _bearer(request)
        if token is None:
            return google_error(401, "UNAUTHENTICATED", UNAUTHENTICATED)
        if config.google_accounts:
            account = request.app[TOKENS].account(token)
            if account is None:
                return google_error(401, "UNAUTHENTICATED", UNAUTHENTICATED)
            if not account.allowed:
                resource = "//aiplatform.googleapis.com" + path.split(":", 1)[0].removeprefix("/v1beta1").removeprefix("/v1")
                return google_error(403, "PERMISSION_DENIED", f"Permission 'aiplatform.endpoints.predict' denied "
                                    f"on resource '{resource}' (or it may not exist).")
        return await handler(request)

    return gate


async def handle_token(request: web.Request) -> web.Response:
    """The JWT-bearer grant: a signed assertion in, an access token out."""
    form = await request.post()
    if form.get("grant_type") != JWT_BEARER:
        return web.json_response({"error": "unsupported_grant_type", "error_description": "Invalid grant_type."},
                                 status=400)
    accounts = request.app[STATE].config.google_accounts
    try:
        account = verify_assertion(str(form.get("assertion", "")), accounts, str(request.url))
    except BadAssertion as e:
        return web.json_response({"error": "invalid_grant", "error_description": str(e)}, status=400)
    token = request.app[TOKENS].issue(account)
    return web.json_response({"access_token": token, "expires_in": TOKEN_LIFETIME_S, "token_type": "Bearer"})


async def handle_publisher_model(request: web.Request) -> web.Response:
    """GetPublisherModel: the model's card (the fields evalkit reads), or Vertex's 404."""
    config = request.app[STATE].config
    publisher, model = request.match_info["publisher"], request.match_info["model"]
    if config.strict_model and model.partition("@")[0] != config.served_model_name.partition("@")[0]:
        return google_error(404, "NOT_FOUND", f"Publisher Model `publishers/{publisher}/models/{model}` not found.")
    return web.json_response({"name": f"publishers/{publisher}/models/{model}", "versionId": "001",
                              "openSourceCategory": "PROPRIETARY", "launchStage": "GA", "owned_by": SIM_OWNER})


def add_vertex_routes(app: web.Application) -> None:
    """The token endpoint and the publisher-model lookup (the model routes are the dialects')."""
    app[TOKENS] = Tokens()
    app.router.add_post(TOKEN_ROUTE, handle_token)
    app.router.add_get(r"/{version:v1|v1beta1}/publishers/{publisher:google|anthropic}/models/{model:[^/:]+}",
                       handle_publisher_model)
