"""The wire formats ("dialects") the simulated server speaks: one instance of each, in routing order.

Each dialect lives in its own module or folder (evalkit/sim/<dialect>); the interface they share
is evalkit/sim/machinery/dialect.py.
"""

from __future__ import annotations

from evalkit.sim.anthropic import AnthropicDialect
from evalkit.sim.azure.wire import AzureDialect
from evalkit.sim.bedrock.wire import BedrockClaudeDialect, ConverseDialect
from evalkit.sim.gemini import GeminiDialect
from evalkit.sim.machinery.dialect import Dialect
from evalkit.sim.openai.dialect import OpenAIDialect
from evalkit.sim.openai.responses import AzureResponsesDialect, ResponsesDialect
from evalkit.sim.openrouter.wire import OpenRouterDialect
from evalkit.sim.vertex.wire import VertexClaudeDialect, VertexGeminiDialect

DIALECTS: tuple[Dialect, ...] = (OpenAIDialect(), AnthropicDialect(), GeminiDialect(), AzureDialect(),
                                 OpenRouterDialect(), VertexGeminiDialect(), VertexClaudeDialect(),
                                 ConverseDialect(), BedrockClaudeDialect(), ResponsesDialect(), AzureResponsesDialect())
__all__ = ["DIALECTS", "Dialect", "OpenAIDialect"]
