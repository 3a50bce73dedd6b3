"""Batch lines carry exactly the live request body (so an answer is the same cache entry either way)."""

from __future__ import annotations

import json

from evalkit.core.types import GenParams, ImagePart, ImageRef, Message
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.batch_api import BatchLine
from evalkit.providers.openai.api import openai_provider


def _request():
    images = [PreparedImage(b"\x89PNGfirst", "image/png", 1, 1)]
    messages = (Message.user(ImagePart(ImageRef("path", "a.png")), "Which option? é"),)
    return messages, GenParams(temperature=0.0, max_tokens=16, seed=3), images


def test_openai_batch_body_is_the_live_body():
    live = openai_provider(ProviderSpec("openai", "gpt-4o"), api_key="k", env={})
    messages, params, images = _request()
    body = live.body(messages, params, images)
    assert body == json.loads(live._encode(messages, params, images))
    assert body["max_completion_tokens"] == 16 and body["messages"][0]["content"][0]["image_url"]["url"].startswith(
        "data:image/png;base64,")


def test_custom_ids_are_stable_digests_within_every_providers_rules():
    live = openai_provider(ProviderSpec("openai", "gpt-4o"), api_key="k", env={})
    a = BatchLine.of(live.body(*_request()))
    b = BatchLine.of(live.body(*_request()))
    assert a.custom_id == b.custom_id and len(a.custom_id) <= 64
    assert all(c.isalnum() or c in "-_" for c in a.custom_id)  # Anthropic: ^[a-zA-Z0-9_-]{1,64}$
    other = BatchLine.of({**a.body, "seed": 4})
    assert other.custom_id != a.custom_id
