"""The request key's JSON is written piece by piece (ask/request_key.py _key_text) for speed: it must be
exactly the text json.dumps gives for the documented payload, or every cached answer would be lost."""

from __future__ import annotations

import hashlib
import random

import pytest

from evalkit.ask.request_key import _key_text, canonical_json, request_key, request_payload
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, TextPart, Transform

TEXTS = ["", "plain", 'quote " and \\ backslash', "line\nbreak\ttab\r", "ctrl \x00\x01\x1f\x7f", "café 東京 ✓",
         "emoji 🦜 and \u2028 separators \u2029", "</script>", "ümlaut" * 50]
TRANSFORMS = [Transform(), Transform(rotate=90), Transform(crop=(1, 2, 30, 40), max_side=512, fmt="PNG"),
              Transform(size=(512, 512), quality=75, max_pixels=1_000_000)]
PARAMS = [GenParams(), GenParams(temperature=0, max_tokens=16), GenParams(temperature=0.7, seed=3, top_p=0.9),
          GenParams(stop=("\n", "Answer")), GenParams(repeat=2), GenParams(reasoning_effort="high"),
          GenParams.with_extra({"chat_template_kwargs": {"enable_thinking": False}, "guided_choice": ["A", "é"]}),
          GenParams(thinking_budget=2048, max_tokens=4096)]


def source_hash(ref: ImageRef) -> str:
    return hashlib.sha256(str(ref.value).encode()).hexdigest()


def random_messages(rng: random.Random) -> tuple[Message, ...]:
    messages = []
    if rng.random() < 0.3:
        messages.append(Message.system(rng.choice(TEXTS)))
    for _ in range(rng.randint(1, 3)):
        parts = [ImagePart(ImageRef("path", f"/data/img{rng.randint(0, 9)}.jpg"), rng.choice(TRANSFORMS))
                 if rng.random() < 0.5 else TextPart(rng.choice(TEXTS) + str(rng.random()))
                 for _ in range(rng.randint(0, 4))]
        messages.append(Message(rng.choice(["user", "assistant"]), tuple(parts)))
    return tuple(messages)


@pytest.mark.parametrize("seed", range(20))
def test_piecewise_text_is_the_canonical_json(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        request = dict(provider=rng.choice(["vllm", "openai", "prov\"ider"]), model=rng.choice(["m", "模型/7b"]),
                       endpoint=rng.choice(["http://127.0.0.1:8000/v1", "tag é"]), params=rng.choice(PARAMS),
                       messages=random_messages(rng), source_hash=source_hash)
        expected = canonical_json(request_payload(**request))
        assert _key_text(*(request[k] for k in ("provider", "model", "endpoint", "params", "messages",
                                                "source_hash"))) == expected
        assert request_key(**request) == hashlib.sha256(expected.encode("utf-8")).hexdigest()


def test_a_pinned_key_stands() -> None:
    """One key as every release since 0.1.0 computed it (the text spelled out here by hand)."""
    messages = (Message.user(ImagePart(ImageRef("path", "/x.jpg"), Transform(rotate=180)), "Which? A or B"),)
    image = source_hash(ImageRef("path", "/x.jpg"))
    text = ('{"endpoint":"e","messages":[{"parts":[{"image":"' + image + '","transform":{"crop":null,"fmt":null,'
            '"max_pixels":null,"max_side":null,"quality":90,"rotate":180,"size":null}},{"text":"Which? A or B"}],'
            '"role":"user"}],"model":"m","params":{"extra":{},"max_tokens":1024,"seed":null,"stop":null,'
            '"temperature":0.0,"top_p":null},"provider":"p","schema":1}')
    assert request_key(provider="p", model="m", endpoint="e", params=GenParams(), messages=messages,
                       source_hash=source_hash) == hashlib.sha256(text.encode()).hexdigest()


def test_nan_is_refused_as_before() -> None:
    with pytest.raises(ValueError):
        request_key(provider="p", model="m", endpoint="e", params=GenParams(temperature=float("nan")),
                    messages=(Message.user("x"),), source_hash=source_hash)
