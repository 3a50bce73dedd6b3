"""What the simulated Bedrock shares between its credential check and its routes: the credentials it accepts
(SimConfig.aws_keys) and AWS's JSON error shape."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

ERROR_NAMESPACE = ":http://internal.amazon.com/coral/com.amazon.bedrock/"


@dataclass(frozen=True)
class AwsTestKeys:
    """An access key, its secret and a session token (None: long-term keys)."""

    access_key: str
    secret_key: str
    token: str | None = None


def aws_error(status: int, name: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """An AWS JSON error: the error's name in x-amzn-ErrorType, its words in `message`."""
    return web.json_response({"message": message}, status=status,
                             headers={**(headers or {}), "x-amzn-ErrorType": name + ERROR_NAMESPACE,
                                      "x-amzn-RequestId": "00000000-0000-4000-8000-000000000000"})
