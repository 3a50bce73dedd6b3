"""The simulated server (`evalkit sim`): a deterministic stand-in for a real model endpoint.

It speaks the OpenAI / vLLM, Anthropic, Gemini, Azure OpenAI and OpenRouter wire formats, answers
from an answer key that evalkit writes from a dataset, and injects faults and rate limits on request,
so tests and the demo exercise the real clients, retries and caches without a network. Tests add
routes of their own (hostile replies) through `routes=` (evalkit.sim.extension).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.sim.answerkey import AnswerEntry, AnswerKey, build_answer_key, normalise_text
    from evalkit.sim.args import add_sim_arguments, config_from_args
    from evalkit.sim.extension import SimRoutes
    from evalkit.sim.machinery.counters import SimCounters, server_request_key
    from evalkit.sim.machinery.faults import FAULT_KINDS, ServerTokenBucket, SimFaults
    from evalkit.sim.machinery.tiers import SimTiers
    from evalkit.sim.model import STYLES, SimModel, SimParams, SimReply, judge_answer, uniform
    from evalkit.sim.server import SimConfig, SimServer, SimThread, build_app, serve_forever, start_sim

# Each name is imported from its submodule on first use, so the CLI can build `evalkit sim`'s
# flags (evalkit.sim.args) without loading the server (aiohttp) or the answer key (numpy, PIL).
_HOME = {
    "AnswerEntry": "answerkey", "AnswerKey": "answerkey", "build_answer_key": "answerkey",
    "normalise_text": "answerkey",
    "add_sim_arguments": "args", "config_from_args": "args",
    "SimCounters": "machinery.counters", "server_request_key": "machinery.counters", "SimRoutes": "extension",
    "FAULT_KINDS": "machinery.faults", "SimFaults": "machinery.faults", "ServerTokenBucket": "machinery.faults",
    "STYLES": "model", "SimModel": "model", "SimParams": "model", "SimReply": "model",
    "judge_answer": "model", "uniform": "model", "SimTiers": "machinery.tiers",
    "SimConfig": "server", "SimServer": "server", "SimThread": "server", "build_app": "server",
    "serve_forever": "server", "start_sim": "server",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "FAULT_KINDS",
    "STYLES",
    "AnswerEntry",
    "AnswerKey",
    "ServerTokenBucket",
    "SimConfig",
    "SimCounters",
    "SimFaults",
    "SimModel",
    "SimParams",
    "SimReply",
    "SimRoutes",
    "SimServer",
    "SimThread",
    "SimTiers",
    "add_sim_arguments",
    "build_answer_key",
    "build_app",
    "config_from_args",
    "judge_answer",
    "normalise_text",
    "serve_forever",
    "server_request_key",
    "start_sim",
    "uniform",
]
