"""Command-line flags of `evalkit sim` (the CLI module adds --host/--port and calls serve_forever)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from evalkit.sim.machinery.faults import DEFAULT_KINDS, FAULT_KINDS, SimFaults
from evalkit.sim.model import STYLES, SimParams

if TYPE_CHECKING:  # the server (aiohttp) and the answer key (numpy) load when a server is configured
    from collections.abc import Callable

    from evalkit.sim.answerkey import AnswerKey
    from evalkit.sim.machinery.aws_shapes import AwsTestKeys
    from evalkit.sim.machinery.key_file import SimKeyFile
    from evalkit.sim.server import SimConfig

# What `evalkit sim` answers without --theta/--r: a plausible model (about 77% on four options, 82% on
# yes/no), so a first run shows a score with errors to read, not 100.0. SimParams() itself stays exact
# (theta = r = 1): tests and code that build a key know every answer it gives.
PLAUSIBLE = SimParams(theta=0.8, r=0.9)


def add_sim_arguments(parser: argparse.ArgumentParser) -> None:
    """Simulation, fault and limit options (not --host/--port, which belong to the CLI)."""
    g = parser.add_argument_group("simulated model")
    g.add_argument("--answer-key", metavar="PATH", help="answer key JSON written by evalkit")
    g.add_argument("--replay", metavar="FILE",
                   help="answer with recorded answers: a run's records.jsonl, or another harness's answers by question "
                        'id (a JSON object id -> answer, or JSON Lines {"id": ..., "answer": ...}; with --bench, '
                        "ids are evalkit's query ids: docs/simulator.md)")
    g.add_argument("--theta", type=float, default=PLAUSIBLE.theta,
                   help=f"share of base questions known (default {PLAUSIBLE.theta}: with --r's default a plausible "
                        "model, not a perfect one; --theta 1 --r 1 answers every question right)")
    g.add_argument("--r", type=float, default=PLAUSIBLE.r, help=f"accuracy on known questions (default {PLAUSIBLE.r})")
    g.add_argument("--g", type=float, default=None, help="accuracy when guessing (default 1/number of options)")
    g.add_argument("--seed", type=int, default=0, help="seed of every simulated draw (default 0)")
    g.add_argument("--style", choices=STYLES, default="letter", help="how replies are worded (default letter)")
    g.add_argument("--sample-rate", type=float, default=0.0,
                   help="share of sampled requests (temperature > 0 or a seed) answered otherwise: a different answer "
                        "per seed, or per identical request without one (default 0: deterministic)")
    g.add_argument("--drift", type=float, default=0.0, metavar="SHARE",
                   help="share of replies worded off the asked format (a letter as 'the second option', a box as "
                        "prose), which the rules cannot read; never a request asking for a structured answer "
                        "(--structured) (default 0)")
    g.add_argument("--think-tokens", type=int, default=0, metavar="N",
                   help="requests with reasoning on think about N tokens (N/2 to 3N/2 per question) before answering, "
                        "and are cut off while thinking when their output limit is smaller (default 0: no thinking)")
    g.add_argument("--served-model-name", default="sim-model", help="name listed by /v1/models")
    g.add_argument("--strict-model", action="store_true",
                   help="404 (an OpenAI-style error naming the model) for other model names, as vLLM answers")
    g.add_argument("--lenient", action="store_true",
                   help="answer any model name while listing only --served-model-name, without saying so "
                        "(llama.cpp's server, TGI, Ollama's tag aliases, LiteLLM wildcard routes)")
    g.add_argument("--owned-by", default="evalkit-sim", metavar="NAME",
                   help="what /v1/models entries say in owned_by (default evalkit-sim; vllm: as vLLM says it)")
    c = parser.add_argument_group("credentials and credits")
    c.add_argument("--api-key", metavar="KEY", default=None,
                   help="401 for API requests without KEY (a bearer token, api-key, x-api-key or x-goog-api-key "
                        "header; Azure routes take it as api-key only, OpenRouter routes as a bearer token)")
    c.add_argument("--entra-token", metavar="TOKEN", default=None,
                   help="Azure routes also take `Authorization: Bearer TOKEN`, as a Microsoft Entra ID token "
                        "(needs --api-key; without it no route checks credentials)")
    c.add_argument("--aws-keys", metavar="ACCESS_KEY:SECRET[:TOKEN]", default=None,
                   help="Bedrock routes (/model/ID/converse, /model/ID/invoke) check each request's SigV4 signature "
                        "against these test credentials, as AWS does (403 otherwise); --api-key is also taken as a "
                        "Bedrock API key (bearer)")
    c.add_argument("--aws-region", metavar="REGION", default="us-east-1",
                   help="the region Bedrock signatures must be scoped to (default us-east-1)")
    c.add_argument("--google-key-file", metavar="PATH", default=None,
                   help="Vertex AI: write a test service account's key file at PATH (a fresh key; its token_uri this "
                        "server's /token) and sign in only that account: point GOOGLE_APPLICATION_CREDENTIALS at it "
                        "(docs/simulator.md)")
    c.add_argument("--credits", metavar="USD", type=float, default=None,
                   help="OpenRouter credits: each answer on /api/v1/chat/completions spends its cost, and once "
                        "none remain requests get 402 until POST /sim/credits tops them up (default: unlimited)")
    f = parser.add_argument_group("faults and limits")
    f.add_argument("--latency-ms", type=float, default=0.0, help="added to every answer")
    f.add_argument("--rps", type=float, default=None, help="requests per second before 429s")
    f.add_argument("--tpm", type=float, default=None, help="tokens per minute (prompt + max_tokens) before 429s")
    f.add_argument("--rate-headers", choices=("openai", "anthropic", "none"), default=None,
                   help="announce the limits in this provider's rate-limit headers (none: not even Retry-After)")
    f.add_argument("--fault-rate", type=float, default=0.0, help="probability a request gets a fault")
    f.add_argument(
        "--fault-kinds",
        default=",".join(DEFAULT_KINDS),
        help=f"comma list of faults to draw from, of {','.join(FAULT_KINDS)} (default {','.join(DEFAULT_KINDS)})",
    )
    f.add_argument("--retry-after", type=float, default=1.0, help="seconds advertised by injected 429s")
    f.add_argument("--hang-s", type=float, default=30.0, help="how long an injected hang lasts before a 504")
    t = parser.add_argument_group("service tiers")
    t.add_argument("--flex-latency-ms", type=float, default=0.0, metavar="MS",
                   help="added to every request asking service_tier flex (default 0)")
    t.add_argument("--no-flex", action="append", default=[], metavar="MODEL",
                   help="a model (an Azure deployment) that does not offer flex: HTTP 400, as Azure answers "
                        "(repeatable)")
    t.add_argument("--flex-refused", type=float, default=0.0, metavar="SHARE",
                   help="the share of flex requests refused for capacity (OpenAI's 429 Resource Unavailable, Gemini's "
                        "and Bedrock's 503), spread evenly (default 0)")
    t.add_argument("--flex-gone", action="store_true", help="flex capacity is gone: every flex request is refused")
    t.add_argument("--priority-over", type=float, default=0.0, metavar="SHARE",
                   help="the share of priority requests over the priority limit, served at standard and "
                        "saying so (default 0)")


def _read(flag: str, path: str, reader: Callable[[str], AnswerKey]) -> AnswerKey:
    """The key a file holds; a file that cannot be opened is a ValueError naming the flag."""
    try:
        return reader(path)
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{flag} {path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """SimConfig from parsed flags; raises ValueError on inconsistent values (the CLI reports it). An answers
    file given to --replay is keyed by the CLI, which knows the benchmark (--bench): not here."""
    from evalkit.sim.answerkey import AnswerKey
    from evalkit.sim.answers_file import is_records
    from evalkit.sim.machinery.tiers import SimTiers
    from evalkit.sim.server import SimConfig

    key: AnswerKey | None = None
    if args.replay and is_records(args.replay):
        key = _read("--replay", args.replay, AnswerKey.from_records)
    elif args.replay and not getattr(args, "bench", None):
        raise ValueError(f"--replay {args.replay} holds answers by question id: name their benchmark with --bench "
                         "(and its --data and options, as for the run)")
    if args.answer_key:
        loaded = _read("--answer-key", args.answer_key, AnswerKey.load)
        key = key.merged(loaded) if key is not None else loaded
    kinds = tuple(k.strip() for k in (args.fault_kinds or "").split(",") if k.strip())
    faults = SimFaults(
        rate=args.fault_rate,
        kinds=kinds,
        retry_after=args.retry_after,
        hang_s=args.hang_s,
        rps=args.rps,
        tpm=args.tpm,
        rate_headers=args.rate_headers,
        seed=args.seed,
    )
    params = SimParams(theta=args.theta, r=args.r, g=args.g, seed=args.seed, style=args.style,
                       sample_rate=args.sample_rate, drift=getattr(args, "drift", 0.0))
    return SimConfig(
        answer_key=key,
        params=params,
        faults=faults,
        served_model_name=args.served_model_name,
        latency_s=max(0.0, args.latency_ms) / 1000.0,
        strict_model=args.strict_model,
        lenient=args.lenient,
        owned_by=args.owned_by,
        think_tokens=args.think_tokens,
        api_key=args.api_key,
        entra_token=args.entra_token,
        credits=args.credits,
        aws_keys=_aws_keys(args.aws_keys),
        aws_region=args.aws_region,
        google_key_file=_google_key_file(getattr(args, "google_key_file", None)),
        tiers=SimTiers(no_flex=tuple(args.no_flex), flex_latency_s=max(0.0, args.flex_latency_ms) / 1000.0,
                       flex_refused=1.0 if args.flex_gone else args.flex_refused, priority_over=args.priority_over),
    )


def _google_key_file(path: str | None) -> SimKeyFile | None:
    """A fresh test service account for the simulated Vertex AI, its key file written once the server listens."""
    if not path:
        return None
    from evalkit.sim.machinery.key_file import new_key_file

    return new_key_file(path)


def _aws_keys(text: str | None) -> AwsTestKeys | None:
    """ACCESS_KEY:SECRET[:TOKEN] as the simulated Bedrock's credentials (ValueError naming the flag)."""
    if not text:
        return None
    from evalkit.sim.machinery.aws_shapes import AwsTestKeys

    access, _, rest = text.partition(":")
    secret, _, token = rest.partition(":")
    if not access or not secret:
        raise ValueError("--aws-keys: expected ACCESS_KEY:SECRET or ACCESS_KEY:SECRET:SESSION_TOKEN")
    return AwsTestKeys(access, secret, token or None)
