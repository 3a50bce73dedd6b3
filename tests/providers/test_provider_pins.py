"""Pins of the five providers' cache keys, run identities and default run-directory names (issue 30,
item 1): the provider-registry refactor must move none of them, or every cache and run directory
written so far would be paid for again (a moved key misses every cached answer; a moved identity
starts a new run directory beside the old one).

For one fixed request per provider (a fixed text, one fixed 4x4 PNG, fixed GenParams) this recomputes,
with today's code and no client, key or server (as a dry run does, through a KeyOnlyProvider):
- the response-cache keys `Runner.keys_of` looks the request up under (today's key, then 0.1.0's
  where that version spelled the endpoint otherwise) and the endpoint they hold, once with a fixed
  --base-url and once with the provider's default URL (openai-compatible/ has none);
- the same keys for the request with a 9000x6000 image instead (fitted to each commercial provider's
  documented image limits, which therefore enter its key), and for the first question of the bundled
  mcq demo set as the benchmark asks it;
- the run identity of `evalkit run mcq --model SPEC --data <bundled datasets/demo/mcq.tsv>` (the
  same two ways), its hash, and the run directory `evalkit.run(..., dry_run=True)` returns for it.

`python tests/test_provider_pins.py` prints the values for the evalkit on the path; with PYTHONPATH at a
worktree of b18ef28 it printed exactly the literals below (the same code runs against both).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import evalkit
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import Runner
from evalkit.ask.store.cache import NullCache
from evalkit.benchmarks.prepare import prepare, resolve_images
from evalkit.benchmarks.run_settings import resolve_settings
from evalkit.core.resources import dataset_path
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, Query, TextPart
from evalkit.engine.resume import KeyOnlyProvider
from evalkit.images.pipeline import ImagePipeline
from evalkit.providers import ProviderSpec, parse_spec
from evalkit.rundir.identity import FileHashes, data_fingerprint, run_identity
from evalkit.rundir.layout import default_run_dir, settings_hash

BASE_URL = "http://gpu1:8000/"  # no path, a trailing slash: each provider's own spelling of it is pinned
# fixed bytes, not encoded by Pillow at test time (another Pillow or zlib may encode otherwise)
PNG_4X4 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAOUlEQVR4nGNgYGBQjV7rtS0qX5CdYUrOlp3HE+8p"
    "8THX7mbUuJGhGr0Wghj2uMg8nH+S7VeZdqgyANGpE1tBiwQ+AAAAAElFTkSuQmCC")
# a 9000x6000 PNG as far as its header goes (signature, IHDR, an empty IDAT, IEND): never decoded, since
# a key needs only the header, and big enough for each commercial provider's image limits to enter its key
PNG_9000X6000_HEADER = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAIygAABdwCAIAAABeRu42AAAAAElEQVQ1rwYeAAAAAElFTkSuQmCC")
TEXT = ("Which colour is the top-left pixel?\nA. red\nB. green\nC. blue\nD. black\n"
        "Answer with the option's letter.")
PARAMS = GenParams(temperature=0.0, max_tokens=64, seed=1234)
SPECS = ("openai/gpt-4o", "anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash",
         "vllm/Qwen/Qwen2.5-VL-7B-Instruct", "openai-compatible/llama-3.2-11b-vision")
CASES = [f"{spec} {how}" for spec in SPECS for how in ("base_url", "default")
         if not (spec.startswith("openai-compatible/") and how == "default")]  # it needs --base-url

# computed by evalkit at b18ef28 (the 0.2 formats); a refactor must not move them.
# HEAD at a07c999 computed the same values: none had moved since 0.2.
# the content of datasets/demo/mcq.tsv and its images (unchanged since b18ef28; editing them moves it)
DEMO_DATA_SHA256 = "b97231d7f075986b1d0b9c5be6a31765aa631f330eb43caf8b673a7fdacddfff"
PINNED: dict[str, dict[str, Any]] = {
    "openai/gpt-4o base_url": {
        "endpoint": "http://gpu1:8000/v1", "legacy_endpoint": "http://gpu1:8000/",
        "keys": ["56ab9fff7da386dfb0bee24f6febdfa7c057b4ca5eeb0a7845a0b7e31a442960",
                 "692c36b695eeca782f2b726754af6993f1a10bd536f7c8f7f2f9e0b5abfdd7bb"],
        "large_keys": ["e31da78834cb313ebcfa11d01e0e1ed2eb7c31d3e61cfd13c6b828f77801961a",
                       "58338577a675f1d6052f412f2c38595b68105dbf2fa5bbaba256bc0f9fb24ab1"],
        "demo_keys": ["3c5c22801c2ace553508401f9c26cb002a08510cb45323e88ec7ba0e1fa83fb7",
                      "a9cb78ee071fba3581d857456a0eb573bb2a477e814339de55c59637d4d759b1"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "openai/gpt-4o",
                     "endpoint": "http://gpu1:8000/v1", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "5734f7dbcf", "dry_run_dir": "mcq-openai_gpt-4o-5734f7dbcf",
    },
    "openai/gpt-4o default": {
        "endpoint": "", "legacy_endpoint": "",
        "keys": ["1ee1583e90c9804118e395474055b74837adc6a78c1c6a245b362d1e9c6b44e8"],
        "large_keys": ["71d75e9b109f81a3e5400b32afa2791b8af900c92dc2302fe7077bd8f65a009f"],
        "demo_keys": ["5585b0a5fe69b3d6964ef791f062600836a0cf4303bc49112714c014744c69a0"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "openai/gpt-4o",
                     "endpoint": "", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "22f9d411f3", "dry_run_dir": "mcq-openai_gpt-4o-22f9d411f3",
    },
    "anthropic/claude-sonnet-4-5 base_url": {
        "endpoint": "http://gpu1:8000", "legacy_endpoint": "http://gpu1:8000/",
        "keys": ["9bcc6395e6a78c8ca70465deb7bed11d8fb030a3519379c0bc146cb4f813db8a",
                 "821c824ce1a7e145361847259eb834bc4beb881796443f0075a5d2d352a7eb4e"],
        "large_keys": ["4caa86251539cd92a49b09b6c7a65f58996015657c8a4eae11a2b9e716e27ed9",
                       "78958464265da98400da8a04f68ffb0b167440fa1c7f903f779319947bea6a30"],
        "demo_keys": ["8cbb5aa929747835aa64e408b2cba3412c6f42feae71dec126bebf9440e16b66",
                      "321225e46883e94edf15751c2adcbaed618f96891ddbb136a2a6cf9fd5bb8e52"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "anthropic/claude-sonnet-4-5",
                     "endpoint": "http://gpu1:8000", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "59e8cc2c30", "dry_run_dir": "mcq-anthropic_claude-sonnet-4-5-59e8cc2c30",
    },
    "anthropic/claude-sonnet-4-5 default": {
        "endpoint": "", "legacy_endpoint": "",
        "keys": ["149c2cd94f8705ae85fab8a08182d3db8e609c812af1e36b94c3d79d4713aae6"],
        "large_keys": ["52bd35d482440383375d1d5be0c61a9a0f64e6529d27fcf57394c0c701211cf8"],
        "demo_keys": ["ebb2fd553e9713c20e28c6ceef1968a093d2ed1c708c1746530a744305fcefa0"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "anthropic/claude-sonnet-4-5",
                     "endpoint": "", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "24cf16804a", "dry_run_dir": "mcq-anthropic_claude-sonnet-4-5-24cf16804a",
    },
    "google/gemini-2.5-flash base_url": {
        "endpoint": "http://gpu1:8000", "legacy_endpoint": "http://gpu1:8000/",
        "keys": ["d48ea25c0e7486abadc20a6ffe9426ce4c1f0430f501549ad2f68bd21b473ebe",
                 "73db667d8c791dee644cd5989e5e03b4cc179d981ac29001c399ce70cf7e2777"],
        "large_keys": ["681cdc36281e07f92dfdc6fbd0777bb88fcf0081a656288ef94bec283e85e252",
                       "a6b3e4302e884503c50b6590663289e7364fc6ef75375a36a888bafda6f083ce"],
        "demo_keys": ["765b193727957a3cc138f0093283757e500508cdd972e252f59674135a8393f0",
                      "976d6aff14e5c1e325f2f4b8afdfb05fad15c9cd470211a4f78028e9cf4cf3c4"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "google/gemini-2.5-flash",
                     "endpoint": "http://gpu1:8000", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "cbcf269327", "dry_run_dir": "mcq-google_gemini-2.5-flash-cbcf269327",
    },
    "google/gemini-2.5-flash default": {
        "endpoint": "", "legacy_endpoint": "",
        "keys": ["b61f0291108bcda6d59f9b8c6dba823e5f7cb0190b9ed3395fb264bdada37998"],
        "large_keys": ["7741101d56b7945b8285881ac6a9fc59f813fe83dc680469d81d4526555265df"],
        "demo_keys": ["d502de3c203a9e4ea5213079b24ef7d11c9b6f291af1cc3fa9246dde419aa4dd"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "google/gemini-2.5-flash",
                     "endpoint": "", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "1112f43ed4", "dry_run_dir": "mcq-google_gemini-2.5-flash-1112f43ed4",
    },
    "vllm/Qwen/Qwen2.5-VL-7B-Instruct base_url": {
        "endpoint": "http://gpu1:8000/v1", "legacy_endpoint": "http://gpu1:8000/",
        "keys": ["c92f04d13340f4b5bcfc11ec2b0596de7bbfc0e5d24ed45e5912416aab5e8c89",
                 "1ca0e0cf2c56120d9d636fe9c80d8626a13e0d80e18e544991bba31422c6ebbe"],
        "large_keys": ["55729444a6a8d737d64c282ac13a941482e04685d44cf331424c3f8aa20b9b5d",
                       "2fb27a25e504e67defe06910df6e65608ea7f38f1678a8506cc1315755858015"],
        "demo_keys": ["44d58319cdc40e1fcd0c9d426d6a2e3a9e0021a86fb0584ac1f4c9929696fb06",
                      "46964aa49d7036f7632367f0e201965cf95b6b3d838e7ce4f707a521f053796d"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "vllm/Qwen/Qwen2.5-VL-7B-Instruct",
                     "endpoint": "http://gpu1:8000/v1", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "c636bceb3b", "dry_run_dir": "mcq-vllm_Qwen_Qwen2.5-VL-7B-Instruct-c636bceb3b",
    },
    "vllm/Qwen/Qwen2.5-VL-7B-Instruct default": {
        "endpoint": "http://localhost:8000/v1", "legacy_endpoint": "http://localhost:8000/v1",
        "keys": ["ff9cafb9bf9654cbd7b6d3871c346c28209dfcace5e700958b0bb618102849f3"],
        "large_keys": ["abc81f8cd5223e2cc809701485b4df3d611e3cba74e297a81dfd6952b2580a14"],
        "demo_keys": ["774a2b5e1852755dd8a6e1db309c7296dd33ffc84e598b0790e5bd97521f5c78"],
        "identity": {"identity_version": 1, "benchmark": "mcq", "model": "vllm/Qwen/Qwen2.5-VL-7B-Instruct",
                     "endpoint": "http://localhost:8000/v1", "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "1a3a3c40a6", "dry_run_dir": "mcq-vllm_Qwen_Qwen2.5-VL-7B-Instruct-1a3a3c40a6",
    },
    "openai-compatible/llama-3.2-11b-vision base_url": {
        "endpoint": "http://gpu1:8000/v1", "legacy_endpoint": "http://gpu1:8000/",
        "keys": ["51273ce4f47d6078af2adb1151a2abd940625d5af558e7c80c8cb5953ad90754",
                 "c6ccf88073ba1a671ba5617fab4ca779b1071e621bd762944644eecb7556dbff"],
        "large_keys": ["f597ac2d376293846c5f6479991f4fe64b5ac42b9f8db1119a3906e18c63a4e3",
                       "b585f05ac1f1254fb70908639bdb7d73593ef223782c1dcb4ea8fa40e5505306"],
        "demo_keys": ["79f213d1c264691304579a946db008fb44242a893b0a8cd14d18a6a9ec1be9c8",
                      "39b2eb1dc8b3bac0e7aa59051ba01c19fe15eedea0e837f02525bbf06b5c6ead"],
        "identity": {"identity_version": 1, "benchmark": "mcq",
                     "model": "openai-compatible/llama-3.2-11b-vision", "endpoint": "http://gpu1:8000/v1",
                     "data_sha256": DEMO_DATA_SHA256},
        "identity_hash": "7854ee4e97", "dry_run_dir": "mcq-openai-compatible_llama-3.2-11b-vision-7854ee4e97",
    },
}


def fixed_query(png: bytes = PNG_4X4) -> Query:
    message = Message("user", (ImagePart(ImageRef.from_bytes(png)), TextPart(TEXT)))
    return Query(id="pin-1", item_id="pin-1", base_id="pin-1", variant={}, messages=(message,), gold="A",
                 options={"A": "red", "B": "green", "C": "blue", "D": "black"}, params=PARAMS)


def keys_of(spec: ProviderSpec, query: Query) -> list[str]:
    """Every key the runner looks `query` up under, computed as a dry run does (no client)."""
    with contextlib.closing(ImagePipeline()) as pipeline:
        runner = Runner(KeyOnlyProvider(spec), limiter=Limiter(concurrency=1), cache=NullCache(),
                        pipeline=pipeline)
        return list(runner.keys_of(query))


def compute_case(case: str, cache_dir: str) -> dict[str, Any]:
    """One case's values: by evalkit's public functions, and the run directory and config of its dry run."""
    spec_text, how = case.split(" ")
    options: dict[str, Any] = {"data": str(dataset_path("demo", "mcq.tsv")), "dry_run": True,
                               "cache_dir": cache_dir, "progress": False}
    if how == "base_url":
        options["base_url"] = (BASE_URL,)
    s = resolve_settings("mcq", spec_text, options)
    spec = parse_spec(s.config.model, s.config.base_url, {})
    prepared = prepare("mcq", s.bench_dict())
    images = resolve_images(s.config.images)
    data_sha256 = data_fingerprint(prepared.data, prepared.items, FileHashes(), images)
    identity = run_identity("mcq", s.options, s.config, spec.label, spec.endpoint, data_sha256)
    quiet = Console(file=io.StringIO())
    result = evalkit.run("mcq", spec_text, **options, env={}, console=quiet)  # sends nothing, writes nothing
    config = result.summary["config"]
    return {"endpoint": spec.endpoint, "legacy_endpoint": spec.legacy_endpoint,
            "keys": keys_of(spec, fixed_query()),
            "large_keys": keys_of(spec, fixed_query(PNG_9000X6000_HEADER)),
            "demo_keys": keys_of(spec, prepared.queries[0]),
            "identity": identity, "identity_hash": settings_hash(identity),
            "dry_run_dir": Path(result.out_dir).name,
            # the identity computed here is the one the run itself used: its directory and its config
            "same_as_run": (default_run_dir("mcq", spec.label, identity).name == Path(result.out_dir).name
                            and all(config.get(k) == v for k, v in identity.items()))}


def compute() -> dict[str, dict[str, Any]]:
    """Every case's values; in an empty working directory (the default run directory is relative to it,
    and a dry run there finds no earlier run)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            return {case: compute_case(case, str(Path(tmp) / "cache")) for case in CASES}
        finally:
            os.chdir(cwd)


def test_every_case_is_pinned() -> None:
    assert list(PINNED) == CASES


@pytest.mark.parametrize("case", CASES)
def test_cache_keys_and_run_identity_did_not_move(case: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default run directory is relative: a dry run here finds no earlier run
    pinned, now = PINNED[case], compute_case(case, str(tmp_path / "cache"))
    assert now["same_as_run"]
    assert (now["endpoint"], now["legacy_endpoint"]) == (pinned["endpoint"], pinned["legacy_endpoint"])
    assert now["keys"] == pinned["keys"], f"{case}: the cache key moved (cached answers would be paid again)"
    assert now["large_keys"] == pinned["large_keys"], f"{case}: the key of a downscaled request moved"
    assert now["demo_keys"] == pinned["demo_keys"], f"{case}: the demo question's cache key moved"
    assert now["identity"] == pinned["identity"], f"{case}: the run identity moved"
    assert now["identity_hash"] == pinned["identity_hash"]
    assert now["dry_run_dir"] == pinned["dry_run_dir"], f"{case}: the default run directory moved"


if __name__ == "__main__":
    print(f"# evalkit from {Path(evalkit.__file__).parent}", file=sys.stderr)
    print(json.dumps(compute(), indent=1, sort_keys=True))
