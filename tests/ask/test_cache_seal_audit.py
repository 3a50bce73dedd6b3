"""`cache verify`'s verdicts (evalkit.ask.store.seal.audit) on entries sealed by evalkit itself: a copied
answer and answers moved round among keys are swapped, a changed one altered, 0.3's unsigned, another
secret's a wrong signature; the seal's text is the documented one (docs/scale.md)."""

from __future__ import annotations

import hashlib
import json

from evalkit.ask.store.seal import (
    ALTERED,
    BADLY_SIGNED,
    PAIR_LIMIT,
    SWAPPED,
    UNSIGNED,
    CacheSeal,
    audit,
)


def _key(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def _sealed(seal: CacheSeal, n: int) -> dict[str, dict]:
    return {_key(i): json.loads(seal.sealed_text(_key(i), {"text": f"answer {i}", "usage": {"input_tokens": i}}))
            for i in range(n)}


def test_the_seal_is_the_documented_one():
    value = {"text": "B é", "latency_s": 0.5, "usage": {"output_tokens": 3}}
    body = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    want_bound = hashlib.sha256(_key(1).encode() + body).hexdigest()
    import hmac as hmac_mod

    want_mac = hmac_mod.new(b"s3", _key(1).encode() + body, hashlib.sha256).hexdigest()
    stored = json.loads(CacheSeal(b"s3").sealed_text(_key(1), value))
    assert stored == {**value, "bound": want_bound, "hmac": want_mac}
    assert "s3" not in repr(CacheSeal(b"s3"))


def test_copies_moves_changes_old_entries_and_other_secrets_are_told_apart():
    seal = CacheSeal(b"ours")
    entries = _sealed(seal, 40)
    keys = list(entries)
    entries[keys[0]] = dict(entries[keys[1]])  # a copy: keys[1] still holds its own
    for i in range(2, 12):  # ten answers moved round one place
        entries[keys[i]] = _sealed(seal, 40)[keys[2 + (i - 1) % 10]]
    entries[keys[12]] = {**entries[keys[12]], "text": "forged"}
    entries[keys[13]] = {"text": "0.3's answer"}
    entries[keys[14]] = json.loads(CacheSeal(b"theirs").sealed_text(keys[14], {"text": "x"}))
    entries[keys[15]] = json.loads(CacheSeal().sealed_text(keys[15], {"text": "y"}))  # bound, no hmac
    verdicts = audit(entries.items(), seal)
    assert {k for k, v in verdicts.items() if v == SWAPPED} == {keys[0], *keys[2:12]}
    assert verdicts[keys[12]] == ALTERED and verdicts[keys[13]] == UNSIGNED
    assert verdicts[keys[14]] == verdicts[keys[15]] == BADLY_SIGNED
    assert len(verdicts) == 15  # keys[1], the copied answer's own, and the rest are sound
    # without the secret, signatures are not checked; 0.3's entries are still named, served or not
    plain = audit(entries.items(), CacheSeal())
    assert keys[14] not in plain and keys[15] not in plain and plain[keys[13]] == UNSIGNED


def test_beyond_the_pair_limit_moved_answers_read_as_altered():
    seal = CacheSeal()
    n = PAIR_LIMIT + 2
    entries = _sealed(seal, n)
    keys = list(entries)
    moved = {keys[i]: entries[keys[(i + 1) % n]] for i in range(n)}
    assert set(audit(moved.items(), seal).values()) == {ALTERED}
