"""The providers' records (evalkit.providers.registry, issue 30 item 1): every record fills every required
field, an unknown provider is one line, a provider without a default URL asks for --base-url in one line,
and `evalkit list` prints what the records say."""

from __future__ import annotations

import io
from dataclasses import fields, replace

import pytest
from rich.console import Console

from evalkit.cli.commands import cmd_list
from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import load_target
from evalkit.images.provider_limits import ImageLimits
from evalkit.providers import api_key_for, parse_spec
from evalkit.providers.registry import RATE_DIALECTS, RECORDS, ProviderInfo, info

REQUIRED = [f.name for f in fields(ProviderInfo) if f.name not in RECORDS["openai"].optional]


def problems(record: ProviderInfo) -> list[str]:
    return [f"provider '{record.name}': field {name} is empty" for name in record.missing()]


@pytest.mark.parametrize("name", list(RECORDS))
def test_every_record_fills_every_required_field(name):
    record = RECORDS[name]
    assert record.name == name
    assert not problems(record), "; ".join(problems(record))
    assert isinstance(record.image_limits, ImageLimits) and record.image_limits.name == name
    assert record.rate_headers in RATE_DIALECTS
    assert callable(record.image_tokens) and record.image_tokens(1024, 768) > 0
    assert record.key_env and all(v.isupper() for v in record.key_env) and record.base_url_env.isupper()


@pytest.mark.parametrize("field_name", REQUIRED)
def test_a_record_missing_a_required_field_fails_naming_provider_and_field(field_name):
    empty = () if isinstance(getattr(RECORDS["openai"], field_name), tuple) else ""
    broken = replace(RECORDS["openai"], name="newco" if field_name != "name" else "", **(
        {field_name: empty} if field_name != "name" else {}))
    found = problems(broken)
    assert any(field_name in p for p in found), found
    assert all(p.startswith(f"provider '{broken.name}'") for p in found)


def test_batch_facts_come_together():
    half = replace(RECORDS["openai"], name="newco", batch_client=None)
    assert problems(half) == ["provider 'newco': field batch_client is empty"]
    assert replace(RECORDS["vllm"], rate_headers="azure-ish").missing() == [
        "rate_headers (not one of openai, anthropic, openrouter, none)"]


@pytest.mark.parametrize("name", list(RECORDS))
def test_clients_are_named_not_imported(name):
    """The record names its client as module:attribute; both resolve (without a key or a network call)."""
    record = RECORDS[name]
    for target in filter(None, (record.client, record.batch_client, record.editor)):
        module, sep, attribute = target.partition(":")
        assert sep and module.startswith("evalkit.providers.") and attribute
    if record.sdk is None:
        assert callable(load_target(record.client))


def test_an_unknown_provider_is_one_line():
    with pytest.raises(EvalkitError) as e:
        parse_spec("newco/some-model")
    assert "\n" not in str(e.value) and "unknown provider 'newco'" in str(e.value)
    assert all(name in str(e.value) for name in RECORDS)
    with pytest.raises(EvalkitError) as e:
        info("newco")
    assert "\n" not in str(e.value) and "newco" in str(e.value)


def test_a_provider_without_default_url_needs_base_url_in_one_line(monkeypatch):
    """Not a KeyError: a provider whose record has no default URL asks for --base-url or its variable."""
    newco = replace(RECORDS["openai-compatible"], name="newco", base_url_env="NEWCO_BASE_URL", default_url=None)
    monkeypatch.setitem(RECORDS, "newco", newco)
    with pytest.raises(EvalkitError) as e:
        parse_spec("newco/m", (), {})
    assert str(e.value) == "--model 'newco/m' needs --base-url (or NEWCO_BASE_URL)"
    assert parse_spec("newco/m", (), {"NEWCO_BASE_URL": "http://h:1/v1"}).base_urls == ("http://h:1/v1",)
    assert parse_spec("newco/m", ("http://x:2/v1",), {}).base_urls == ("http://x:2/v1",)


def test_keys_come_from_the_records_variables():
    google = parse_spec("google/gemini-2.5-flash", (), {})
    assert api_key_for(google, {"GOOGLE_API_KEY": "g"}) == "g"
    assert api_key_for(google, {"GEMINI_API_KEY": "a", "GOOGLE_API_KEY": "g"}) == "a"
    with pytest.raises(EvalkitError, match=r"^GEMINI_API_KEY \(or GOOGLE_API_KEY\) is not set \(needed for "
                                           r"--model google/gemini-2.5-flash\)$"):
        api_key_for(google, {})
    assert api_key_for(parse_spec("vllm/m", (), {}), {}) is None


def test_evalkit_list_prints_the_records():
    out = io.StringIO()
    assert cmd_list(None, Console(file=out, width=300, color_system=None)) == 0
    text = out.getvalue()
    providers = text.partition("providers")[2].splitlines()[1:]
    assert len(providers) == len(RECORDS)
    for line, record in zip(providers, RECORDS.values(), strict=True):
        assert line.split()[0] == record.name
        assert record.description in line
        assert record.base_url_env in line and record.key_env[0] in line
