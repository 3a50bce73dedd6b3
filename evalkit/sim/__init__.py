"""The simulated server (`evalkit sim`): a deterministic stand-in for a real model endpoint.

It speaks the OpenAI / vLLM chat-completions wire format, answers from an answer key that
evalkit writes from a dataset, and injects faults and rate limits on request, so tests and the
demo exercise the real clients, retries and caches without a network.
"""

from evalkit.sim.answerkey import AnswerEntry, AnswerKey, build_answer_key, normalise_text
from evalkit.sim.args import add_sim_arguments, config_from_args
from evalkit.sim.counters import SimCounters, request_key
from evalkit.sim.faults import FAULT_KINDS, SimFaults, TokenBucket
from evalkit.sim.model import STYLES, SimModel, SimParams, SimReply, judge_answer, uniform
from evalkit.sim.server import SimConfig, SimServer, SimThread, build_app, serve_forever, start_sim

__all__ = [
    "FAULT_KINDS",
    "STYLES",
    "AnswerEntry",
    "AnswerKey",
    "SimConfig",
    "SimCounters",
    "SimFaults",
    "SimModel",
    "SimParams",
    "SimReply",
    "SimServer",
    "SimThread",
    "TokenBucket",
    "add_sim_arguments",
    "build_answer_key",
    "build_app",
    "config_from_args",
    "judge_answer",
    "normalise_text",
    "request_key",
    "serve_forever",
    "start_sim",
    "uniform",
]
