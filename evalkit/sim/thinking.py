"""The simulated model thinks (`evalkit sim --think-tokens N`), so thinking that runs out of tokens can be
tested offline.

With N > 0 and a request that turns reasoning on, the model thinks T tokens before it answers, T drawn
per question from the question's text, its images and the server seed: uniform in [N/2, 3N/2], the same
on every server started with that seed. A request whose output budget is below T + the answer's tokens
is cut off while thinking, and each dialect says so the way its API does (the dialects shape it):

- OpenAI (`reasoning_effort` other than "none"/"minimal"): empty content, finish "length", all of the
  budget counted as `completion_tokens_details.reasoning_tokens` (OpenAI never returns the thinking).
- vLLM (`chat_template_kwargs.enable_thinking` true): the content is the unclosed `<think>` block.
- Anthropic (`thinking.type` "enabled" or "adaptive"): one thinking block, stop_reason "max_tokens".
- Gemini (`thinkingConfig` with a budget > 0, -1 (dynamic) or a `thinkingLevel`): finish MAX_TOKENS,
  `thoughtsTokenCount` the budget and no `candidatesTokenCount`; the thought part is returned only with
  `includeThoughts`, otherwise the candidate has no parts at all, as the real API answers.
- Bedrock's Converse (Amazon Nova's `reasoningConfig` enabled): a `reasoningContent` block and no text,
  stopReason "max_tokens"; Claude on Bedrock thinks as Anthropic's API does.

Budgets are the output limits (`max_completion_tokens`/`max_tokens`, Anthropic `max_tokens`, Gemini
`maxOutputTokens`); the thinking budgets themselves (`budget_tokens`, `thinkingBudget`) do not bound T:
the simulated model thinks as long as the question needs, and only the output limit stops it.
Without a budget nothing is cut. Pure functions: the server decides, the dialects shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.sim.model import uniform

# Thinking prose: no standalone capital letter, so no answer parser reads an option out of it.
PHRASE = "Let me look at the picture closely and weigh every option against what it shows. "
SIGNATURE = "c2ltLXNpZ25hdHVyZQ=="  # what the simulator's Anthropic thinking blocks are signed with
STYLES = ("openai", "vllm", "anthropic", "gemini", "converse")


@dataclass(frozen=True)
class Thought:
    """The thinking of one reply. tokens: thinking tokens in it (T, or the whole budget when cut off);
    text: that many tokens of thinking prose; cut: the budget ran out while thinking (no answer)."""

    style: str  # which API's way of carrying thinking (STYLES)
    tokens: int
    text: str
    cut: bool


def _pick(d: dict[str, Any], camel: str, snake: str) -> Any:
    return d[camel] if camel in d else d.get(snake)


_VENDOR_OF = {"vertex-gemini": "gemini", "vertex-claude": "anthropic",  # a cloud's route thinks as its vendor's
              "bedrock-claude": "anthropic"}


def thinking_style(dialect: str, body: Any) -> str | None:
    """Which API's thinking a request turns on (None: reasoning off, the reply is as without thinking)."""
    if not isinstance(body, dict):
        return None
    dialect = _VENDOR_OF.get(dialect, dialect)
    if dialect == "anthropic":
        thinking = body.get("thinking")
        return "anthropic" if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive") else None
    if dialect == "gemini":
        config = _pick(body, "generationConfig", "generation_config")
        thinking = _pick(config, "thinkingConfig", "thinking_config") if isinstance(config, dict) else None
        if not isinstance(thinking, dict):
            return None
        budget = _pick(thinking, "thinkingBudget", "thinking_budget")
        level = _pick(thinking, "thinkingLevel", "thinking_level")
        on_budget = isinstance(budget, int) and not isinstance(budget, bool) and (budget > 0 or budget == -1)
        on_level = isinstance(level, str) and level not in ("", "THINKING_LEVEL_UNSPECIFIED")
        return "gemini" if on_budget or on_level else None
    if dialect == "bedrock-converse":  # Amazon Nova's reasoningConfig, among the model's own fields
        fields = body.get("additionalModelRequestFields")
        config = fields.get("reasoningConfig") if isinstance(fields, dict) else None
        return "converse" if isinstance(config, dict) and config.get("type") == "enabled" else None
    if dialect in ("openai-responses", "azure-responses"):  # the Responses API: reasoning.effort (issue 47)
        reasoning = body.get("reasoning")
        effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
        return "openai" if isinstance(effort, str) and effort not in ("none", "minimal") else None
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and kwargs.get("enable_thinking") is True:
        return "vllm"
    effort = body.get("reasoning_effort")
    return "openai" if isinstance(effort, str) and effort not in ("none", "minimal") else None


def think_length(n: int, seed: int, text: str, fps: list[str]) -> int:
    """T for one question: uniform over [n/2, 3n/2] (at least 1), from the question and the seed only."""
    low, high = n // 2, n + n // 2
    return max(1, low + int(uniform(seed, "think", text, *fps) * (high - low + 1)))


def thinking_text(tokens: int) -> str:
    """`tokens` tokens of thinking prose (four characters a token, as the simulator counts)."""
    length = 4 * max(0, tokens)
    return (PHRASE * (length // len(PHRASE) + 1))[:length]


def think(style: str, need: int, budget: int | None, answer_tokens: int) -> Thought:
    """The thinking of a reply that needs `need` thinking tokens and `answer_tokens` for its answer, under an
    output budget (None: unlimited): cut off, with the whole budget spent thinking, when they do not fit."""
    if budget is not None and budget < need + answer_tokens:
        return Thought(style, budget, thinking_text(budget), cut=True)
    return Thought(style, need, thinking_text(need), cut=False)
