"""Azure OpenAI's chat completions: OpenAI's shape on Azure's routes, with the deployment naming the
model, the content filter's verdicts in every reply and its 400 for a filtered prompt
(learn.microsoft.com/azure/ai-foundry/openai/reference and .../concepts/content-filter, read 2026-11-26).

Two route families answer alike: the classic `/openai/deployments/{deployment}/chat/completions`
(the deployment in the path answers, whatever the body's `model` says) and the v1
`/openai/v1/chat/completions` (the body's `model` is the deployment). The api-version and
credential checks that come before a body is read are in evalkit.sim.azure.routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from evalkit.sim.machinery.wire import BadRequest, ParsedRequest, SimUsage, parse_body
from evalkit.sim.openai.dialect import OpenAIDialect

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState

CLASSIC_CHAT = "/openai/deployments/{deployment}/chat/completions"
V1_CHAT = "/openai/v1/chat/completions"
_CATEGORIES = ("hate", "self_harm", "sexual", "violence")
FILTER_MESSAGE = ("The response was filtered due to the prompt triggering Azure OpenAI's content management policy. "
                  "Please modify your prompt and retry. To learn more about our content filtering policies please "
                  "read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766")
NO_DEPLOYMENT = ("The API deployment for this resource does not exist. If you created the deployment within the "
                 "last 5 minutes, please wait a moment and try again.")


def _verdicts(*extra: str) -> dict[str, Any]:
    """Every category passed: what an unfiltered prompt or answer is annotated with."""
    out: dict[str, Any] = {name: {"filtered": False, "severity": "safe"} for name in _CATEGORIES}
    out.update({name: {"filtered": False, "detected": False} for name in extra})
    return out


class AzureDialect(OpenAIDialect):
    """OpenAI chat completions as an Azure OpenAI resource answers them."""

    name = "azure"
    routes = (CLASSIC_CHAT, V1_CHAT)

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        deployment = request.match_info.get("deployment")
        if deployment is not None:  # the classic route: the path names the model
            if not isinstance(body, dict):
                raise BadRequest("request body must be a JSON object")
            body = {**body, "model": deployment}
        return parse_body(body)

    def dress(self, state: SimState, req: ParsedRequest, reply: dict[str, Any], usage: SimUsage) -> dict[str, Any]:
        reply["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": _verdicts("jailbreak")}]
        for choice in reply.get("choices", []):
            choice["content_filter_results"] = _verdicts("protected_material_code", "protected_material_text")
        return reply

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        """Azure's own shapes for an unknown deployment and a rate limit; OpenAI's for the rest."""
        if kind == "not_found":
            return web.json_response({"error": {"code": "DeploymentNotFound", "message": NO_DEPLOYMENT}},
                                     status=404, headers=headers)
        if kind == "rate_limit":
            text = f"Requests to the ChatCompletions_Create Operation have exceeded the rate limit: {message}."
            return web.json_response({"error": {"code": "429", "message": text}}, status=429, headers=headers)
        return super().error(status, kind, message, headers)

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        """The prompt filter's verdict: a 400, not a reply."""
        return web.json_response({"error": {
            "code": "content_filter", "message": FILTER_MESSAGE, "param": "prompt", "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation",
                           "content_filter_result": {"violence": {"filtered": True, "severity": "medium"}}}}},
            status=400)
