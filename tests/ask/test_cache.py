"""Cache keys are content-addressed and stable; stored values are JSON text, never pickle."""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import pickle
import sqlite3
import threading
import typing
from pathlib import Path
from typing import Any

import pytest

from evalkit.ask.request_key import SCHEMA_VERSION, request_key
from evalkit.ask.store.cache import CacheLike, CacheStats, NullCache, ResponseCache
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, Response, TextPart, Transform, Usage


def hash_bytes(ref: ImageRef) -> str:
    """Like images.source_hash: the sha256 of the source bytes, whatever the reference kind."""
    if ref.kind == "path":
        data = Path(str(ref.value)).read_bytes()
    elif ref.kind == "b64":
        data = base64.b64decode(str(ref.value))
    else:
        assert isinstance(ref.value, bytes)
        data = ref.value
    return hashlib.sha256(data).hexdigest()


IMG = ImageRef.from_bytes(b"\x89PNG fake image one")
IMG2 = ImageRef.from_bytes(b"\x89PNG fake image two")


def base_kwargs(**over: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "provider": "openai",
        "model": "gpt-4o",
        "endpoint": "https://api.openai.com/v1",
        "params": GenParams(),
        "messages": (Message.system("Be brief."), Message.user(ImagePart(IMG), "Which is it?\nA. x\nB. y")),
        "source_hash": hash_bytes,
    }
    kw.update(over)
    return kw


def key(**over: Any) -> str:
    return request_key(**base_kwargs(**over))


# --- request_key -----------------------------------------------------------------------------


def test_key_is_stable_sha256_hex() -> None:
    k = key()
    assert k == key()
    assert len(k) == 64 and int(k, 16) >= 0
    # rebuilt from equal (not identical) objects
    same = (
        Message("system", (TextPart("Be brief."),)),
        Message("user", (ImagePart(IMG, Transform()), TextPart("Which is it?\nA. x\nB. y"))),
    )
    assert key(messages=same) == k


def test_key_matches_documented_canonical_json() -> None:
    msgs = (Message.user(ImagePart(IMG, Transform(rotate=90)), "hi"),)
    payload = {
        "schema": SCHEMA_VERSION,
        "provider": "p",
        "model": "m",
        "endpoint": "e",
        "params": GenParams().to_dict(),
        "messages": [
            {
                "role": "user",
                "parts": [
                    {
                        "image": hash_bytes(IMG),
                        "transform": {
                            "rotate": 90,
                            "crop": None,
                            "max_side": None,
                            "max_pixels": None,
                            "size": None,
                            "fmt": None,
                            "quality": 90,
                        },
                    },
                    {"text": "hi"},
                ],
            }
        ],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert (
        request_key(
            provider="p", model="m", endpoint="e", params=GenParams(), messages=msgs, source_hash=hash_bytes
        )
        == expected
    )


@pytest.mark.parametrize(
    "change",
    [
        {"provider": "vllm"},
        {"model": "gpt-4o-mini"},
        {"endpoint": "http://localhost:8000/v1"},
        {"params": GenParams(temperature=0.7)},
        {"params": GenParams(max_tokens=2048)},
        {"params": GenParams(seed=1)},
        {"params": GenParams(stop=("\n",))},
        {"params": GenParams(top_p=0.9)},
        {"params": GenParams.with_extra({"chat_template_kwargs": {"enable_thinking": False}})},
        {"messages": (Message.system("Be brief!"), Message.user(ImagePart(IMG), "Which is it?\nA. x\nB. y"))},
        {"messages": (Message.user(ImagePart(IMG), "Which is it?\nA. x\nB. y"),)},  # no system message
        {
            "messages": (
                Message.system("Be brief."),
                Message.user(ImagePart(IMG2), "Which is it?\nA. x\nB. y"),
            )
        },
        {"messages": (Message.system("Be brief."), Message.user("Which is it?\nA. x\nB. y", ImagePart(IMG)))},
        {
            "messages": (
                Message.system("Be brief."),
                Message.user(ImagePart(IMG, Transform(rotate=90)), "Which is it?\nA. x\nB. y"),
            )
        },
        {
            "messages": (
                Message.system("Be brief."),
                Message.user(ImagePart(IMG, Transform(max_side=1024)), "Which is it?\nA. x\nB. y"),
            )
        },
        {
            "messages": (
                Message.system("Be brief."),
                Message.user(ImagePart(IMG, Transform(fmt="JPEG")), "Which is it?\nA. x\nB. y"),
            )
        },
        {
            "messages": (
                Message.system("Be brief."),
                Message.user(ImagePart(IMG, Transform(crop=(0, 0, 5, 5))), "Which is it?\nA. x\nB. y"),
            )
        },
        {
            "messages": (
                Message("assistant", (TextPart("Be brief."),)),
                Message.user(ImagePart(IMG), "Which is it?\nA. x\nB. y"),
            )
        },
    ],
)
def test_any_output_affecting_change_changes_the_key(change: dict[str, Any]) -> None:
    assert key(**change) != key()


def test_text_split_across_parts_is_not_the_same_request() -> None:
    one = (Message.user("ab"),)
    two = (Message.user("a", "b"),)
    assert key(messages=one) != key(messages=two)


def test_key_depends_on_image_bytes_not_path(tmp_path: Path) -> None:
    data = b"\x89PNG same bytes"
    a = tmp_path / "a" / "img.png"
    b = tmp_path / "moved" / "elsewhere.png"
    for p in (a, b):
        p.parent.mkdir(parents=True)
        p.write_bytes(data)

    def msgs(ref: ImageRef) -> tuple[Message, ...]:
        return (Message.user(ImagePart(ref), "q"),)

    k_path = key(messages=msgs(ImageRef.from_path(str(a))))
    assert key(messages=msgs(ImageRef.from_path(str(b)))) == k_path
    assert key(messages=msgs(ImageRef.from_bytes(data))) == k_path
    assert key(messages=msgs(ImageRef.from_b64(base64.b64encode(data).decode()))) == k_path
    b.write_bytes(data + b"!")
    assert key(messages=msgs(ImageRef.from_path(str(b)))) != k_path


def test_numeric_spelling_does_not_change_the_key() -> None:
    assert key(params=GenParams(temperature=0)) == key(params=GenParams(temperature=0.0))
    assert key(params=GenParams(top_p=1)) == key(params=GenParams(top_p=1.0))


def test_extra_order_does_not_change_the_key() -> None:
    a = GenParams.with_extra({"a": 1, "b": {"y": 2, "x": 1}})
    b = GenParams.with_extra({"b": {"x": 1, "y": 2}, "a": 1})
    assert key(params=a) == key(params=b)


def test_non_ascii_text_is_keyed_as_text() -> None:
    assert key(messages=(Message.user("图中是什么？"),)) != key(messages=(Message.user("图中是什么?"),))


# --- ResponseCache ---------------------------------------------------------------------------


def sample_value() -> dict[str, Any]:
    return Response(text="B. y — 是", usage=Usage(12, 3), finish_reason="stop", latency_s=0.25).to_cache()


def test_round_trip_and_counters(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c") as cache:
        assert cache.get("k1") is None
        cache.set("k1", sample_value())
        got = cache.get("k1")
        assert got == sample_value()
        assert Response.from_cache(got).text == "B. y — 是"
        assert (cache.hits, cache.misses) == (1, 1)
        assert "k1" in cache and len(cache) == 1
        cache.set("k1", {"text": "overwritten"})
        assert cache.get("k1") == {"text": "overwritten"}


def test_persists_across_instances(tmp_path: Path) -> None:
    first = ResponseCache(tmp_path)
    first.set("k", {"text": "hello", "usage": {"input_tokens": 1}})
    first.close()
    second = ResponseCache(tmp_path)
    assert second.get("k") == {"text": "hello", "usage": {"input_tokens": 1}}
    assert (second.hits, second.misses) == (1, 0)  # counters are per object, not persisted
    second.close()


def test_set_rejects_non_json(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    with pytest.raises(TypeError):
        cache.set("k", {"obj": object()})
    with pytest.raises(TypeError):
        cache.set("k", {"x": float("nan")})
    with pytest.raises(TypeError):
        cache.set("k", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cache.set(("tuple", "key"), {"x": 1})  # type: ignore[arg-type]
    assert len(cache) == 0
    cache.close()


def test_stats_and_clear(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "nested" / "dir")
    assert (tmp_path / "nested" / "dir").is_dir()
    empty = cache.stats()
    assert isinstance(empty, CacheStats) and empty.entries == 0
    for i in range(5):
        cache.set(f"k{i}", {"text": "x" * 1000, "i": i})
    s = cache.stats()
    assert s.entries == 5
    assert s.size_bytes > 0
    assert s.directory == str(tmp_path / "nested" / "dir")
    assert s.to_dict()["entries"] == 5
    assert cache.clear() == 5
    assert cache.stats().entries == 0
    assert cache.get("k0") is None
    assert cache.clear() == 0
    cache.close()


def test_values_in_sqlite_are_json_text_not_pickle(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    big = {"text": "long answer " * 10_000}  # > diskcache's default 32 KB side-file threshold
    cache.set("small", sample_value())
    cache.set("big", big)
    cache.close()
    con = sqlite3.connect(tmp_path / "cache.db")
    try:
        rows = con.execute("SELECT key, raw, mode, filename, value, typeof(value) FROM Cache").fetchall()
    finally:
        con.close()
    assert {r[0] for r in rows} == {"small", "big"}
    for k, raw, _mode, filename, value, sql_type in rows:
        assert raw == 1  # key stored as itself, not pickled
        assert filename is None  # inline in cache.db, no side files
        assert sql_type == "text"
        assert isinstance(value, str)
        decoded = json.loads(value)
        assert len(decoded.pop("bound")) == 64  # sealed to its key (ask/store/seal.py)
        assert decoded == (big if k == "big" else sample_value())
        with pytest.raises(pickle.UnpicklingError):
            pickle.loads(value.encode("utf-8"))


def test_corrupt_or_foreign_entries_are_misses(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.set("ok", {"text": "fine"})
    cache.set("broken", {"text": "fine"})
    cache.set("list", {"text": "fine"})
    cache.close()
    con = sqlite3.connect(tmp_path / "cache.db")
    try:
        # an entry written by something else: a pickled blob (mode 4), and broken JSON text
        con.execute(
            "UPDATE Cache SET mode = 4, value = ? WHERE key = 'ok'", (pickle.dumps({"text": "evil"}),)
        )
        con.execute("UPDATE Cache SET value = '{not json' WHERE key = 'broken'")
        con.execute("UPDATE Cache SET value = '[1, 2]' WHERE key = 'list'")
        con.commit()
    finally:
        con.close()
    cache = ResponseCache(tmp_path)
    assert cache.get("ok") is None  # never unpickled
    assert cache.get("broken") is None
    assert cache.get("list") is None  # JSON, but not a response dict
    assert (cache.hits, cache.misses) == (0, 3)
    cache.close()


def test_concurrent_threads(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(50):
                cache.set(f"{t}-{i}", {"t": t, "i": i})
                assert cache.get(f"{t}-{i}") == {"t": t, "i": i}
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert cache.stats().entries == 400
    assert cache.hits == 400
    cache.close()


# --- NullCache -------------------------------------------------------------------------------


def test_null_cache_stores_nothing() -> None:
    cache = NullCache()
    cache.set("k", {"text": "x"})
    assert cache.get("k") is None
    assert (cache.hits, cache.misses) == (0, 1)
    assert cache.stats() == CacheStats(entries=0, size_bytes=0, directory="")
    assert cache.clear() == 0
    with pytest.raises(TypeError):
        cache.set("k", {"obj": object()})  # same validation as the real cache
    cache.close()


def _protocol_members() -> dict[str, Any]:
    """CacheLike's methods with their signatures, and its attributes with their types."""
    methods = {name: inspect.signature(getattr(CacheLike, name)) for name in ("get", "set", "stats", "clear", "close")}
    return {**methods, **typing.get_type_hints(CacheLike)}


@pytest.mark.parametrize("kind", ["disk", "null"])
def test_both_caches_satisfy_the_protocol(tmp_path: Path, kind: str) -> None:
    """Each cache has every member of CacheLike with the same parameters, and keeps its promises: the
    counters count, stats and clear report what is stored, and the optional batched calls agree with
    the single ones (the runner uses whichever is there)."""
    cache: CacheLike = ResponseCache(tmp_path) if kind == "disk" else NullCache()
    stores = kind == "disk"
    for name, want in _protocol_members().items():
        have = getattr(cache, name)
        if isinstance(want, inspect.Signature):
            assert list(inspect.signature(have).parameters) == list(want.parameters)[1:], name
        else:
            assert isinstance(have, want), name
    assert cache.blocking is stores  # the disk cache is called from a thread, the null one inline
    assert (cache.hits, cache.misses) == (0, 0)
    assert cache.get("absent") is None and (cache.hits, cache.misses) == (0, 1)
    cache.set("k", {"a": 1})
    assert cache.get("k") == ({"a": 1} if stores else None)
    assert (cache.hits, cache.misses) == ((1, 1) if stores else (0, 2))
    cache.set_many([("m1", {"b": [1, 2]}), ("m2", {"c": "x"})])  # type: ignore[attr-defined]
    many = cache.get_many(["k", "m1", "m2", "absent"])  # type: ignore[attr-defined]
    assert many == ({"k": {"a": 1}, "m1": {"b": [1, 2]}, "m2": {"c": "x"}} if stores else {})
    assert all(cache.get(k) == v for k, v in many.items())
    stats = cache.stats()
    assert isinstance(stats, CacheStats) and stats.entries == (3 if stores else 0)
    assert cache.clear() == (3 if stores else 0)
    assert cache.stats().entries == 0 and cache.get("k") is None
    cache.close()
