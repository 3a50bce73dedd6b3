"""Retry-After as the providers send it: seconds, milliseconds or an HTTP date, read from any header
mapping, clamped to a day; `inf`, `nan`, negative or unreadable values never mean "wait forever".

What a run does with the number is in test_retry_policy_waits.py (virtual time) and test_bounded_waits.py
(whole runs).
"""

from __future__ import annotations

from datetime import datetime, timezone

import httpx2
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from evalkit.core.errors import MAX_HEADER_WAIT_S, parse_retry_after, retry_after_from_headers

NOW = datetime(2015, 10, 21, 7, 27, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("value, seconds", [
    ("120", 120.0), (" 7 ", 7.0), ("0", 0.0), ("1.5", 1.5), (".25", 0.25), ("3.", 3.0),
    ("999999", MAX_HEADER_WAIT_S), ("9" * 400, MAX_HEADER_WAIT_S),  # valid but absurd: clamped, never inf
    ("inf", None), ("Infinity", None), ("-inf", None), ("nan", None), ("NaN", None),
    ("-1", None), ("-0.5", None), ("1e3", None), ("0x10", None), ("+5", None), ("\u0661\u0662", None),
    ("soon", None), ("", None), ("   ", None), (None, None),
    # HTTP-dates (RFC 9110: IMF-fixdate, RFC 850, asctime), measured from NOW = 07:27:00 that day
    ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0),
    ("Wednesday, 21-Oct-15 07:28:00 GMT", 60.0),
    ("Wed Oct 21 07:28:00 2015", 60.0),
    ("Wed, 21 Oct 2015 07:26:00 GMT", 0.0),  # already past: retry now
    ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_HEADER_WAIT_S),
    ("Wed, 21 Oct 2015 25:28:00 GMT", None),  # hour 25
    ("Wed, 21 Oct 99999 07:28:00 GMT", None),
    ("Wed, 32 Foo 2015 07:28:00 GMT", None),
])
def test_parse_retry_after(value, seconds):
    got = parse_retry_after(value, now=NOW)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


def test_the_clamp_is_a_day():
    assert MAX_HEADER_WAIT_S == 86400.0


@pytest.mark.parametrize("make", [dict, lambda d: CIMultiDictProxy(CIMultiDict(d)), httpx2.Headers],
                         ids=["dict", "aiohttp", "httpx"])
def test_retry_after_from_headers_any_mapping_any_case(make):
    assert retry_after_from_headers(make({"Retry-After-Ms": "250", "RETRY-AFTER": "1"})) == 0.25
    assert retry_after_from_headers(make({"retry-after": "3"})) == 3.0
    assert retry_after_from_headers(make({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}), now=NOW) == 90.0
    assert retry_after_from_headers(make({"retry-after-ms": "inf", "Retry-After": "2"})) == 2.0  # falls through
    assert retry_after_from_headers(make({"retry-after-ms": "nan"})) is None
    assert retry_after_from_headers(make({"retry-after-ms": "-5", "retry-after": "inf"})) is None
    assert retry_after_from_headers(make({"retry-after-ms": "1" + "0" * 30})) == MAX_HEADER_WAIT_S
    assert retry_after_from_headers(make({"Content-Type": "application/json"})) is None
    assert retry_after_from_headers(make({})) is None


def test_retry_after_from_no_headers():
    assert retry_after_from_headers(None) is None
