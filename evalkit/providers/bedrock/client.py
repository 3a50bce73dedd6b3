"""`bedrock/<model id>`: Amazon Bedrock. Claude through the anthropic SDK's Bedrock client, every other
model through the Converse API (evalkit.providers.bedrock.converse).

A model id is Claude's when its vendor part is `anthropic.`, with or without an inference profile's
geography in front (`anthropic.claude-…`, `us.anthropic.claude-…`, `global.anthropic.claude-…`). Claude
goes through `anthropic.AsyncAnthropicBedrock` (`POST /model/{id}/invoke`, the Messages body with
`anthropic_version: bedrock-2023-05-31`; the SDK signs with SigV4 through boto3), so thinking, prompt
caching and refusals are Anthropic's, as for `anthropic/`.

Where requests go: `--base-url`, else AWS_ENDPOINT_URL_BEDROCK_RUNTIME (botocore's variable for a
bedrock-runtime endpoint), else `https://bedrock-runtime.{AWS_REGION}.amazonaws.com`. That URL and the model
id are the endpoint's identity (the cache key's): the region is in the URL, an inference profile's
geography in the id; credentials never are. Credentials: evalkit.providers.bedrock.aws_sign; a Bedrock API key
(AWS_BEARER_TOKEN_BEDROCK) is sent as a bearer token instead of signing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalkit.core.errors import EvalkitError, ProviderError
from evalkit.core.sdk import import_sdk
from evalkit.core.types import GenParams, Message, Response
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.anthropic.client import AnthropicProvider
from evalkit.providers.base import ProviderSpec
from evalkit.providers.bedrock.aws_sign import AwsCredentials, AwsRedactor, region_of
from evalkit.providers.bedrock.converse import ConverseProvider
from evalkit.providers.bedrock.errors import bedrock_error
from evalkit.providers.registry import is_claude
from evalkit.providers.tiers import BEDROCK_INVOKE_TIERS
from evalkit.providers.wire.http_limits import DEFAULT_MAX_RESPONSE_BYTES
from evalkit.providers.wire.sdk_http import ACCEPTED_ENCODINGS

ENDPOINT_ENV = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
BEARER_ENV = "AWS_BEARER_TOKEN_BEDROCK"
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"  # the body's anthropic_version on Bedrock (AWS's Claude guide)


def locate(urls: Sequence[str], env: Mapping[str, str], label: str, flag: str = "--model") -> tuple[str, ...]:
    """The spec's base URLs: --base-url, else AWS_ENDPOINT_URL_BEDROCK_RUNTIME, else the region's endpoint."""
    if urls:
        return tuple(urls)
    if env.get(ENDPOINT_ENV):
        return (env[ENDPOINT_ENV].strip(),)
    try:
        return (f"https://bedrock-runtime.{region_of(env, label)}.amazonaws.com",)
    except EvalkitError as e:
        raise EvalkitError(str(e).replace("--model", flag, 1)) from None


class BedrockClaude(AnthropicProvider):
    """Claude on Bedrock: the Messages adapter of `anthropic/` on the SDK's Bedrock client."""

    body_fields = {"anthropic_version": BEDROCK_ANTHROPIC_VERSION}  # noqa: RUF012 - read only
    wire_tiers = BEDROCK_INVOKE_TIERS  # InvokeModel names the tier in a header, both ways (providers/tiers.py)

    def __init__(self, spec: ProviderSpec, *, region: str, credentials: AwsCredentials | None, bearer: str | None,
                 profile: str | None, timeout_s: float = 120.0, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        self._region, self._credentials, self._bearer, self._profile = region, credentials, bearer, profile
        import_sdk("boto3", spec.label)  # the SDK's Bedrock client signs through boto3: one line when it is missing
        super().__init__(spec, api_key=bearer or "", timeout_s=timeout_s, cache_marker=True,
                         max_response_bytes=max_response_bytes)
        self._redact = credentials.redactor([bearer]) if credentials is not None else AwsRedactor([bearer])

    def _make_client(self, anthropic: Any, kwargs: dict[str, Any]) -> Any:
        """anthropic.AsyncAnthropicBedrock on the guarded HTTP client. Accept-Encoding is set before the SDK
        signs: the guard's request hook runs after the signature and would otherwise change a signed header
        wherever httpx's own default differs (brotli or zstandard installed: AWS's InvalidSignatureException)."""
        auth: dict[str, Any] = {"api_key": self._bearer} if self._bearer else {"aws_profile": self._profile}
        if not self._bearer and self._credentials is not None and self._credentials.from_env:
            keys = self._credentials.keys()
            auth = {"aws_access_key": keys.access_key, "aws_secret_key": keys.secret_key,
                    "aws_session_token": keys.token}
        try:
            return anthropic.AsyncAnthropicBedrock(
                **auth, aws_region=self._region, base_url=self.spec.base_urls[0], max_retries=0,
                timeout=kwargs["timeout"], http_client=kwargs["http_client"],
                default_headers={"Accept-Encoding": ACCEPTED_ENCODINGS})
        except ValueError as e:  # both a Bedrock API key and AWS credentials, as the SDK sees them
            raise EvalkitError(f"--model {self.spec.label}: {e}") from None

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        try:
            return await super().complete(messages, params, images)
        except ProviderError as e:
            raise self._redact.error(_bedrock_words(e, self.spec.model)) from e


def _bedrock_words(e: ProviderError, model: str) -> ProviderError:
    """An SDK status error classified by Bedrock's own error name where the SDK kept it (x-amzn-ErrorType)."""
    response = getattr(e.__cause__, "response", None)
    if response is None or e.status is None:
        return e
    try:
        body = response.content or b""
    except Exception:  # noqa: BLE001 - a body the SDK did not read (httpx's ResponseNotRead): its name is enough
        body = b""
    redone = bedrock_error(e.status, response.headers, body, model)
    redone.retry_after, redone.limits = e.retry_after, e.limits
    return redone


def bedrock_provider(spec: ProviderSpec, *, api_key: str | None, env: Mapping[str, str], timeout_s: float = 120.0,
                     max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> AnthropicProvider | ConverseProvider:
    """The client its record names: Claude's or Converse's, signed for the run's region."""
    region = region_of(env, spec.label)
    bearer = api_key or None  # AWS_BEARER_TOKEN_BEDROCK, a Bedrock API key
    credentials = None if bearer else AwsCredentials(env, spec.label)
    if is_claude(spec.provider, spec.model):  # bare or behind an inference profile (`us.anthropic.…`)
        return BedrockClaude(spec, region=region, credentials=credentials, bearer=bearer,
                             profile=env.get("AWS_PROFILE") or None, timeout_s=timeout_s,
                             max_response_bytes=max_response_bytes)
    return ConverseProvider(spec, region=region, credentials=credentials, bearer=bearer, timeout_s=timeout_s,
                            max_response_bytes=max_response_bytes)
