"""Typed settings: what a run is told (RunConfig), the hooks `evalkit.run` takes besides settings,
and the values the reasoning switch takes.

Every setting is an `option(...)` field with its help text and its role (core/options.py, whose
names are re-exported here, where benchmarks and tests import them), so the command line, the
Python API's validation and the run identity are all derived from one place and cannot disagree.

Stdlib only: the CLI builds its parser from these classes before anything heavy is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.options import ROLES as ROLES  # re-exported, with the names below: the settings API
from evalkit.core.options import add_arguments as add_arguments
from evalkit.core.options import build as build
from evalkit.core.options import field_names as field_names
from evalkit.core.options import flag_of as flag_of
from evalkit.core.options import given as given
from evalkit.core.options import non_default as non_default
from evalkit.core.options import option
from evalkit.core.options import unknown_option as unknown_option
from evalkit.core.read_caps import IMAGE_MB, LINE_MB
from evalkit.core.shard import parse_shard
from evalkit.core.tiers import STANDARD, TIERS, request_timeout, settings_problem

#: --repeats' cap: pass@k and majority votes are read at k <= 200 (Codex's n = 200); a 2,000-question set
#: repeated 1,000 times is already 2 million queries held at once (about 0.4 KB each expanded, measured on
#: mcq's demo set: 0.75 GB before any record). Beyond it the run held every expanded query in memory until
#: the machine ran out (issue 44).
MAX_REPEATS = 1000

# ---- the reasoning switch: which values it takes (what each provider takes: its record, providers/reasoning.py) ----

REASONING_EFFORTS = ("none", "low", "medium", "high")
# ---- the image resolution settings (issue 45, item 2; which provider takes which: its record's image_setting)
IMAGE_DETAILS = ("low", "high", "auto")  # OpenAI's image_url detail; auto is the API's default: the same as none
MEDIA_RESOLUTIONS = ("low", "medium", "high")  # Gemini's media_resolution (MEDIA_RESOLUTION_LOW, …)
API_ROUTES = ("responses", "chat")  # --api (issue 47): OpenAI's Responses API or Chat Completions


def switch_problem(effort: str | None, budget: int | None) -> str | None:
    """Why `--reasoning-effort` / `--thinking-budget` cannot go to any provider (one line naming the flag), or
    None. Which provider refuses which is its record's to say (providers/reasoning.py: reasoning_problem),
    checked where the settings are resolved for a model, before anything is written."""
    if effort is not None and budget is not None:
        return "give --reasoning-effort or --thinking-budget, not both"
    if effort is not None and effort not in REASONING_EFFORTS:
        return f"--reasoning-effort must be one of {', '.join(REASONING_EFFORTS)}, not {effort!r}"
    if budget is not None and budget < 0:
        return f"--thinking-budget must be at least 0, not {budget}"
    return None


@dataclass(frozen=True)
class RunConfig:
    """Everything `evalkit run` is told besides the benchmark and its protocol options."""

    model: str = option("", help="PROVIDER/MODEL, e.g. openai/gpt-4o or vllm/Qwen2.5-VL-7B", role="endpoint")
    data: str | None = option(help="SOURCE: a data file or folder, hf://OWNER/NAME[@REVISION][/PATH] (the Hugging "
                                   "Face Hub), or sample (the bundled sample); default: the benchmark's official "
                                   "source (pinned, checksummed), mcq's demo set, or what an existing --out recorded",
                              role="operational")  # its *content* enters the identity as a fingerprint
    lock: str | None = option(help="the data lock to read (default ./evalkit.lock when it exists; "
                                   "`evalkit data lock` writes it)", role="operational")
    images: str | None = option(help="folder the data's image paths are relative to", role="operational")
    out: str | None = option(help="run directory (default: runs/<bench>-<model>-<settings hash>)", role="operational")
    limit: int | None = option(help="only the first N items", at_least=1)
    shard: str | None = option(help="K/N: ask only the K-th of N deterministic parts of the items (1-based; by a "
                                    "hash of each item's id), in its own run directory; `evalkit merge` joins "
                                    "the shards into one run", metavar="K/N")
    mode: str = option("official", help="answer parsing mode", choices=("official", "robust"))
    judge: str | None = option(help="LLM extractor model for answers the rules cannot parse, e.g. openai/gpt-4o-mini",
                               role="operational")
    judge_base_url: str | None = option(help="base URL of an OpenAI-compatible judge server", role="operational")
    base_url: tuple[str, ...] = option((), help="server URL (vllm/, openai-compatible/; repeatable)",
                                       role="endpoint", repeat=True)
    cache_tag: str | None = option(help="use this tag instead of the server URL in cache keys (a moved server)",
                                   role="endpoint")
    api_version: str | None = option(help="azure/: the API version of the classic route /openai/deployments/… "
                                          "(default OPENAI_API_VERSION; with neither, Azure's v1 API)",
                                     role="operational")
    provider_routing: dict[str, Any] | None = option(
        help='openrouter/: provider routing preferences, the JSON object sent as "provider", e.g. '
             '\'{"order": ["Azure"], "allow_fallbacks": false}\' (part of the cache key: it changes who answers)',
        role="generation")
    concurrency: int = option(32, help="requests in flight (default 32)", role="operational", at_least=1)
    rpm: float | None = option(help="requests per minute ceiling (the rate below it is learned)", role="operational",
                               above=0)
    tpm: float | None = option(help="tokens per minute ceiling (the rate below it is learned)", role="operational",
                               above=0)
    adaptive: bool = option(True, help="do not learn rate limits from the provider's headers and 429s",
                            role="operational", flag="--no-adaptive")
    timeout: float | None = option(help="seconds per request (default 120; 900 with --service-tier flex)",
                                   role="operational", above=0)
    max_attempts: int = option(8, help="attempts per query for retryable errors", role="operational",
                               at_least=1)
    max_retry_after: float = option(60.0, help="longest Retry-After wait honoured, in seconds (default 60)",
                                    role="operational", at_least=0)
    max_response_mb: float = option(32.0, help="largest reply accepted, decompressed, in MB (default 32)",
                                    role="operational", above=0)
    max_line_mb: float = option(LINE_MB, help=f"longest data line (JSONL line, TSV row, a JSON file read whole) "
                                f"read, in MB (default {LINE_MB:g})", role="operational", above=0)
    max_image_mb: float = option(IMAGE_MB, help=f"largest image read, in MB (default {IMAGE_MB:g}; an item whose "
                                 "image is larger is not asked)", role="operational", above=0)
    reask_changed: bool = option(False, help="re-ask queries whose data, images or prompt changed since they were "
                                 "answered (with --out)", role="operational")
    reask: bool = option(False, help="ask again, with today's requests, the queries this run directory answered "
                         "with an earlier evalkit's (0.1's non-official prompts)", role="operational")
    strict: bool = option(False, help="stop before any request when the data's lint finds an error-level fault "
                          "(exit 2; without it the faults are reported and the run goes on)", role="operational")
    allow_outside_images: bool = option(False, help="read image paths that lead outside the data and --images "
                                        "folders (absolute, ../, symlinks)", role="operational")
    cache_dir: str | None = option(help="response cache folder (default ./cache or EVALKIT_CACHE_DIR)",
                                   role="operational")
    no_cache: bool = option(False, help="neither read nor write the response cache", role="operational")
    cache_url: str | None = option(help="share the response cache through Redis: redis://[:PASSWORD@]HOST:PORT/DB "
                                        "or rediss:// (default EVALKIT_CACHE_URL); the local cache stays in front",
                                   role="operational")
    cache_signed_only: bool = option(False, help="serve only cache entries sealed by evalkit 0.4 or later (signed, "
                                     "with EVALKIT_CACHE_SECRET): those of 0.1-0.3 are asked again (or "
                                     "EVALKIT_CACHE_SIGNED_ONLY=1; docs/scale.md)", role="operational")
    cache_fallback: str = option("none", help="when the --cache-url server stops answering mid-run: stop (none, "
                                              "the default; resumable) or go on with the local cache (local)",
                                 choices=("none", "local"), role="operational")
    max_tokens: int | None = option(help="max output tokens (default: the benchmark's, 1024)", role="generation",
                                    at_least=1)
    temperature: float | None = option(help="sampling temperature (default 0)", role="generation", at_least=0)
    seed: int | None = option(help="sampling seed sent to the model", role="generation")
    reasoning_effort: str | None = option(help="how much the model reasons, mapped per provider: openai/ "
                                          "reasoning_effort, anthropic/ and google/ a thinking budget, vllm/ "
                                          "enable_thinking (docs/reasoning.md)", role="generation",
                                          choices=REASONING_EFFORTS)
    thinking_budget: int | None = option(help="thinking tokens (anthropic/, google/; 0 = no thinking)",
                                         role="generation", at_least=0, metavar="TOKENS")
    reask_cutoffs: bool = option(False, help="ask again, with the larger --max-tokens given, only the answers cut off "
                                 "while thinking (token limit before any answer); everything else stays as it is",
                                 role="operational")
    repeats: int = option(1, help="ask every query N times (repeat r sends --seed + r); scores per repeat, their "
                          "mean and spread, agreement, majority vote and pass@k (default 1, at most 1000)",
                          role="operational", at_least=1, at_most=MAX_REPEATS)
    extra: dict[str, Any] | None = option(
        help='JSON object merged into the request body, e.g. \'{"guided_choice": ["A","B"]}\'', role="generation")
    max_side: int | None = option(help="downscale images so the longer side is at most N pixels", role="generation",
                                  at_least=1)
    max_pixels: int | None = option(help="downscale images to at most N pixels", role="generation", at_least=1)
    detail: str | None = option(help="the detail each image is sent with (OpenAI-shaped endpoints: openai/, azure/, "
                                     "openrouter/, vllm/, openai-compatible/); auto is the API's default, the same "
                                     "run as no flag (docs/providers.md)", role="generation", choices=IMAGE_DETAILS)
    media_resolution: str | None = option(help="the media resolution images are read at (google/ and vertex/ "
                                               "Gemini: MEDIA_RESOLUTION_LOW/MEDIUM/HIGH; docs/providers.md)",
                                          role="generation", choices=MEDIA_RESOLUTIONS)
    api: str | None = option(help="the OpenAI API a request goes to: responses (the Responses API) or chat (Chat "
                                  "Completions); default: the model's own (its record names the models that "
                                  "exist only on Responses, e.g. o3-pro), else chat (docs/providers.md)",
                             role="generation", choices=API_ROUTES)
    structured: bool = option(False, help="robust mode: ask for the answer as JSON in the benchmark's schema (a "
                              "letter among the options, Yes/No, a box), sent each provider's way; the rules "
                              "read other replies (docs/providers.md)", role="generation")
    progress: bool = option(True, help="no live progress bar", role="operational", flag="--no-progress")
    plots: bool = option(True, help="draw no plots (summary.json and report.md only)", role="operational",
                         flag="--no-plots")
    dry_run: bool = option(False, help="count queries and cached answers, estimate tokens and cost; send nothing",
                           role="operational")
    max_cost: float | None = option(help="stop sending new queries before this run directory's spending would pass "
                                    "USD (what earlier invocations spent counts; each request's estimated cost is "
                                    "reserved before it is sent)", role="operational", above=0)
    shared_budget: str | None = option(help="with --max-cost and --cache-url: keep the budget in that Redis under "
                                       "NAME, shared by every process naming it (shards, teammates)",
                                       role="operational", metavar="NAME")
    prices: str | None = option(help="JSON file of prices overriding/extending the built-in table",
                                role="operational")
    batch: bool = option(False, help="send through the provider's batch API at about half the price (openai/, "
                         "anthropic/, google/); waits with progress, resumable", role="operational")
    wait: bool = option(True, help="with --batch: submit the batches and exit 1; the same command later collects "
                        "them", role="operational", flag="--no-wait")
    batch_timeout: float = option(86400.0, help="with --batch: seconds to wait for batches (default 86400)",
                                  role="operational", above=0)
    batch_fallback: str = option("none", help="with --batch: what to do with requests still unanswered after "
                                 "--batch-timeout", role="operational", choices=("none", "live"))
    batch_tokens: int | None = option(help="with --batch: the enqueued-token limit the provider enforces for the "
                                           "model (OpenAI and Azure set one per model and tier, in input tokens): "
                                           "no batch holds more, and the next waits until those queued leave room",
                                      role="operational", at_least=1)
    service_tier: str | None = option(help="the provider's service tier: flex (cheaper, slower, may be refused), "
                                           "priority (faster, dearer) or standard; a delivery setting like --batch "
                                           "(not in the cache key: same answers), priced at the tier each reply says "
                                           "served it (docs/providers.md)", role="operational", choices=TIERS)
    tier_fallback: str | None = option(help="with --service-tier flex|priority: send at standard a request whose tier "
                                            "has no capacity, after a bounded wait", role="operational",
                                       choices=(STANDARD,))
    tier_wait: float = option(900.0, help="with --service-tier flex|priority: how long, in seconds, a request whose "
                                           "tier has no capacity keeps retrying with its own back-off before it fails, "
                                           "or is sent at standard with --tier-fallback standard (default 900: the "
                                           "15 minutes of OpenAI's and Gemini's flex guides)", role="operational",
                              at_least=0)
    group_images: bool = option(True, help="do not send questions on the same image back to back",
                                role="operational", flag="--no-group-images")
    until_ci: float | None = option(help="ask the items in a seeded random order (whole variant groups) and stop "
                                         "once the headline's 95 %% interval is at most +-W points; the same "
                                         "command with a smaller W, or without the flag, continues the run "
                                         "(docs/stopping.md)", role="operational", above=0, metavar="W")
    sample_seed: int = option(0, help="the seed of a sampled run's order (--until-ci, --until-decided; default 0)",
                              role="operational", metavar="N")
    until_decided: bool = option(False, help="a matrix (or compare --continue): stop giving a model new items once "
                                 "every pair it is in is decided (docs/stopping.md)", role="operational")
    width: float | None = option(help="with --until-decided: a pair whose difference's 95 %% interval is at most "
                                      "+-W points is decided too", role="operational", above=0, metavar="W")

    def __post_init__(self) -> None:
        if self.shard is not None:  # kept as "K/N": the identity's spelling, whatever spaces were typed
            object.__setattr__(self, "shard", str(parse_shard(self.shard)))
        if self.detail == "auto":  # the API's default: the same requests, key and run as no flag
            object.__setattr__(self, "detail", None)
        problem = (switch_problem(self.reasoning_effort, self.thinking_budget) or self._sample_problem()
                   or self._structured_problem()
                   or settings_problem(self.service_tier, self.tier_fallback, self.batch))
        if problem is not None:  # refused before anything is written
            raise EvalkitError(problem)

    def _structured_problem(self) -> str | None:
        """Why --structured cannot be used here (one line naming both flags), or None."""
        if self.structured and self.mode == "official":
            return ("--structured and --mode official cannot go together: official mode sends what the paper "
                    "sent (use --mode robust)")
        return None

    def _sample_problem(self) -> str | None:
        """Why the sampled-run flags cannot go together (one line naming both), or None."""
        if self.until_ci is not None and self.limit is not None:
            return ("--limit and --until-ci cannot go together: --until-ci asks a seeded random sample of the whole "
                    "set and stops on its own (drop --limit)")
        return None

    @property
    def request_timeout(self) -> float:
        """Seconds per request: --timeout, else 900 with --service-tier flex, else 120 (core/tiers.py)."""
        return request_timeout(self.timeout, self.service_tier)

    def cache_path(self, env: Mapping[str, str]) -> str:
        return self.cache_dir or env.get("EVALKIT_CACHE_DIR") or "cache"

    def shared_cache_url(self, env: Mapping[str, str]) -> str | None:
        """The Redis URL of a shared cache (--cache-url, else EVALKIT_CACHE_URL), or None: the local one only."""
        return self.cache_url or env.get("EVALKIT_CACHE_URL") or None

    def generation(self) -> dict[str, Any]:
        """The generation and image-size settings the user gave (None = the benchmark's default)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata["role"] == "generation"}


#: How a model x benchmark matrix (multi/matrix.py) runs its pairs: the folder each default run
#: directory goes in, the limiters shared per endpoint, the line no pair sends before, and each
#: pair's progress handed to the matrix's one display.
MATRIX_HOOKS = ("runs_root", "limiters", "start_gate", "watch_progress")
#: Keyword arguments of `evalkit.run` that are hooks for embedding code, not settings (`quiet=True`:
#: print nothing, docs/python.md).
HOOKS = ("env", "console", "on_record", "plotter", "quiet", "stop_rule", *MATRIX_HOOKS)
