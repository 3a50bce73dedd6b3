"""received.jsonl (evalkit.ask.store.received): one line per answer, read back whatever a kill left, and
replayed into the cache a resumed run looks in (under --no-cache, in front of it)."""

from __future__ import annotations

from evalkit.ask.store.cache import NullCache, ResponseCache
from evalkit.ask.store.received import ReceivedJournal, replay


def _value(text: str) -> dict:
    return {"text": text, "usage": {"input_tokens": 10, "output_tokens": 1}, "image_sizes": [[32, 32]]}


def test_each_answer_is_one_line_and_a_torn_last_line_is_skipped(tmp_path):
    journal = ReceivedJournal(tmp_path / "received.jsonl")
    journal.add("k1", _value("A"))
    journal.add("k2", _value("é \ud800"))  # a lone surrogate, as a reply may carry
    with (tmp_path / "received.jsonl").open("ab") as f:
        f.write(b'{"key":"k3","value":{"te')  # what a power cut may leave
    journal.close()
    assert (tmp_path / "received.jsonl").read_bytes().count(b"\n") == 2
    assert list(journal.entries()) == ["k1", "k2"] and journal.entries()["k1"] == _value("A")


def test_a_journal_that_cannot_be_written_turns_itself_off(tmp_path):
    journal = ReceivedJournal(tmp_path / "gone" / "received.jsonl")
    journal.add("k1", _value("A"))  # no error: the records and the cache still keep the answer
    assert journal.broken is not None and journal.entries() == {}


def test_replay_gives_a_persistent_cache_what_it_lacks_and_keeps_what_it_has(tmp_path):
    journal = ReceivedJournal(tmp_path / "received.jsonl")
    journal.add("k1", _value("A"))
    journal.add("k2", _value("B"))
    with ResponseCache(tmp_path / "cache") as cache:
        cache.set("k2", _value("C"))  # a teammate's answer to the same request stays
        assert replay(journal, cache) is cache
        assert cache.get("k1") == _value("A") and cache.get("k2") == _value("C")


def test_replay_under_no_cache_reads_the_journal_in_front_of_the_empty_cache(tmp_path):
    journal = ReceivedJournal(tmp_path / "received.jsonl")
    journal.add("k1", _value("A"))
    looked = replay(journal, NullCache())
    assert looked.get("k1") == _value("A") and looked.get("k9") is None
    assert looked.get_many(["k1", "k9"]) == {"k1": _value("A")}
    assert looked.blocking is False and looked.stats().entries == 0
    assert replay(ReceivedJournal(tmp_path / "none.jsonl"), NullCache()).get("k1") is None
