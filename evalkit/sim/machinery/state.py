"""One simulated server's configuration and state, shared by every route and every dialect.

Kept apart from the server module so the dialects and the routes can name the state (and the
app key it is stored under) without importing the server that imports them.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import os
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from aiohttp import web
from PIL import Image

from evalkit.core import fingerprint
from evalkit.sim.answerkey import AnswerKey
from evalkit.sim.machinery.accounts import ServiceAccount
from evalkit.sim.machinery.aws_shapes import AwsTestKeys
from evalkit.sim.machinery.counters import SimCounters
from evalkit.sim.machinery.credits import Credits
from evalkit.sim.machinery.faults import FaultDice, SimFaults
from evalkit.sim.machinery.gate import ReplyGate
from evalkit.sim.machinery.heard import HeardLog
from evalkit.sim.machinery.key_file import SimKeyFile
from evalkit.sim.machinery.limits import HiddenLimits
from evalkit.sim.machinery.prompt_cache import PrefixCache
from evalkit.sim.machinery.tiers import SimTiers
from evalkit.sim.machinery.wire import BadRequest
from evalkit.sim.model import SimModel, SimParams

SIM_OWNER = "evalkit-sim"  # what the model list and lookups say in owned_by: the simulator, by name


@dataclass
class SimConfig:
    """Everything that shapes one simulated server. latency_s adds to faults.latency_s."""

    answer_key: AnswerKey | None = None
    params: SimParams = field(default_factory=SimParams)
    faults: SimFaults = field(default_factory=SimFaults)
    served_model_name: str = "sim-model"
    latency_s: float = 0.0
    strict_model: bool = False  # 404 for model names other than served_model_name, as vLLM (and Ollama) answer
    lenient: bool = False  # lists served_model_name alone, answers any name and does not say so (llama.cpp, TGI)
    owned_by: str = SIM_OWNER  # what /v1/models entries say in owned_by; "vllm" is how vLLM identifies itself
    api_key: str | None = None  # when set, 401 for API requests that do not carry it (vllm serve --api-key)
    fp_cache_size: int = 4096
    snapshot: str | None = None  # the model name replies carry (a dated snapshot); None: the name asked for
    system_fingerprint: str | None = None  # OpenAI-style backend fingerprint in chat-completion replies
    think_tokens: int = 0  # > 0: requests with reasoning on think about this many tokens (evalkit.sim.thinking)
    entra_token: str | None = None  # a Microsoft Entra ID token Azure routes take as a bearer token (None: none)
    credits: float | None = None  # OpenRouter credits in USD that answers spend (None: unlimited); 402 at 0
    openrouter_price: tuple[float, float] = (2.5, 10.0)  # OpenRouter's price, USD per million input, output tokens
    google_accounts: tuple[ServiceAccount, ...] = ()  # Vertex AI: service accounts the token endpoint signs in
    # Vertex AI: a test account whose key file is written once the server listens (`--google-key-file`)
    google_key_file: SimKeyFile | None = None
    aws_keys: AwsTestKeys | None = None  # Bedrock: the credentials its routes check SigV4 signatures against
    aws_region: str = "us-east-1"  # Bedrock: the region a signature must be scoped to
    tiers: SimTiers = field(default_factory=SimTiers)  # the service tiers it sells (evalkit.sim.machinery.tiers)

    def __post_init__(self) -> None:
        if self.lenient and self.strict_model:
            raise ValueError("a lenient server answers any model name: it cannot be strict about them too")
        if self.think_tokens < 0:
            raise ValueError(f"think tokens must be 0 or more, not {self.think_tokens}")
        if self.entra_token and not self.api_key:
            raise ValueError("an Entra ID token is checked only alongside an API key: set api_key too")
        if self.google_key_file is not None and self.google_key_file.public not in self.google_accounts:
            self.google_accounts = (*self.google_accounts, self.google_key_file.public)
        if len(self.openrouter_price) != 2 or min(self.openrouter_price) < 0:
            raise ValueError(f"the OpenRouter price is two non-negative USD amounts, not {self.openrouter_price}")


ImageInfo = tuple[str, int, int]


def decode_image(b64: str) -> ImageInfo:
    """Fingerprint and size of base64 image bytes; BadRequest when they are not an image."""
    try:
        data = base64.b64decode(b64, validate=False)
        fp = fingerprint.fingerprint_bytes(data)
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
    except (binascii.Error, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise BadRequest(f"could not decode image: {exc}") from exc
    return fp, width, height


class SimState:
    """Per-server state: the model, the fault dice, the rate limiter, counters, fingerprint memo, the
    requests heard and the credits left."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.model = SimModel(config.params, config.answer_key)
        self.dice = FaultDice(config.faults)
        self.limits = HiddenLimits(config.faults)
        self.counters = SimCounters()
        self.heard = HeardLog()  # every API request, without its credentials (evalkit.sim.machinery.heard)
        self.credits = Credits(config.credits)  # OpenRouter's prepaid balance
        self.prefix_cache = PrefixCache()
        self.latency_s = config.latency_s + config.faults.latency_s
        self.closing = asyncio.Event()
        self.gate = ReplyGate()  # tests hold replies to keep a run open (evalkit.sim.machinery.gate)
        self.twin_prefixes: list[str] = []  # routes added from outside (evalkit.sim.extension)
        self.reset_hooks: list[Callable[[], None]] = []  # theirs, called on POST /sim/reset
        self._fps: OrderedDict[str, asyncio.Future[ImageInfo]] = OrderedDict()
        self._pool = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="evalkit-sim-img")
        self._serial = 0

    async def image_info(self, url: str) -> ImageInfo:
        """(fingerprint, width, height) of a data-URI image, memoised by the sha1 of its base64 text.

        Decoding runs in a small thread pool (PIL releases the GIL), and concurrent requests for
        the same picture share one decode.
        """
        head, sep, b64 = url.partition(",")
        if not sep or not head.startswith("data:") or ";base64" not in head:
            raise BadRequest("only base64 data: image URLs are supported by evalkit sim")
        memo = hashlib.sha1(b64.encode("ascii", "replace")).hexdigest()
        fut = self._fps.get(memo)
        if fut is None:
            fut = asyncio.get_running_loop().run_in_executor(self._pool, decode_image, b64)
            self._fps[memo] = fut
            if len(self._fps) > self.config.fp_cache_size:
                self._fps.popitem(last=False)
        else:
            self._fps.move_to_end(memo)
        try:
            return await asyncio.shield(fut)
        except BadRequest:
            self._fps.pop(memo, None)
            raise

    def shutdown(self) -> None:
        self.closing.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def next_id(self) -> str:
        self._serial += 1
        return f"chatcmpl-sim{self._serial:010d}"


STATE = web.AppKey("evalkit_sim_state", SimState)
