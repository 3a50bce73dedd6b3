"""The image-token formulas per model family (issue 45, item 2): the documents' worked examples, each family's
branch, and the simulator's own copy agreeing with the client's over many sizes (the two are kept apart by
the sim-apart contract, so this is where they are held to one reading)."""

from __future__ import annotations

import itertools

import pytest

from evalkit.images.token_formulas import (
    anthropic_image_tokens,
    gemini_image_tokens,
    openai_image_tokens,
    patches,
)
from evalkit.providers.registry import RECORDS
from evalkit.sim.machinery.image_cost import server_gemini_image_cost, server_openai_image_cost


def test_the_openai_guide_s_worked_examples():
    assert openai_image_tokens(1024, 1024, "gpt-4o") == 765
    assert openai_image_tokens(2048, 4096, "gpt-4o-2024-08-06") == 1105
    assert openai_image_tokens(4096, 8192, "gpt-4o", "low") == 85
    assert patches(1024, 1024) == 1024 and patches(1800, 2400) == 1452


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-4.1-mini", 1659), ("gpt-4.1-nano-2025-04-14", 2520), ("o4-mini", 1762), ("gpt-5-mini", 1659),
    ("gpt-5-nano", 2520), ("openai/gpt-4.1-mini", 1659),  # a router's VENDOR/MODEL
])
def test_patch_models_pay_per_patch_whatever_the_detail(model, expected):
    assert openai_image_tokens(1024, 1024, model) == openai_image_tokens(1024, 1024, model, "low") == expected


@pytest.mark.parametrize(("model", "base", "tile"), [
    ("gpt-4o", 85, 170), ("gpt-4.1", 85, 170), ("gpt-4o-mini", 2833, 5667), ("o3", 75, 150), ("o1-2024-12-17", 75, 150),
    ("my-azure-deployment", 85, 170),
])
def test_tile_models_pay_base_plus_tiles_and_low_is_the_base(model, base, tile):
    assert openai_image_tokens(1024, 1024, model) == base + 4 * tile
    assert openai_image_tokens(1024, 1024, model, "low") == base


def test_gemini_2_and_3():
    assert gemini_image_tokens(300, 300, "gemini-2.5-flash") == 258
    assert gemini_image_tokens(1600, 800, "gemini-2.5-flash") == 258 * 3 * 2
    assert [gemini_image_tokens(1600, 800, "gemini-2.5-pro", s) for s in ("low", "medium", "high")] == [64, 256, 256]
    assert [gemini_image_tokens(100, 100, "gemini-3-pro-preview", s) for s in ("low", "medium", "high", None)] == [
        280, 560, 1120, 1120]
    assert gemini_image_tokens(100, 100, "gemini-3.1-flash", "low") == 280


def test_records_name_the_formula_and_the_setting():
    assert RECORDS["openai"].image_tokens is openai_image_tokens and RECORDS["openai"].image_setting == "detail"
    assert RECORDS["google"].image_tokens is gemini_image_tokens
    assert RECORDS["anthropic"].image_tokens is anthropic_image_tokens and RECORDS["anthropic"].image_setting is None


SIZES = [(w, h) for w, h in itertools.product((31, 96, 384, 385, 512, 700, 1024, 1537, 2048, 3000, 5000), repeat=2)]


@pytest.mark.parametrize("model", ["gpt-4o-2024-11-20", "gpt-4o-mini", "o3", "gpt-4.1-mini", "gpt-5-nano", "o4-mini"])
@pytest.mark.parametrize("detail", ["low", "high"])
def test_the_simulator_counts_as_the_client_estimates(model, detail):
    for w, h in SIZES:
        assert server_openai_image_cost(model, [detail], [(w, h)]) == openai_image_tokens(w, h, model, detail), (w, h)


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-3-pro-preview"])
@pytest.mark.parametrize("level", ["low", "medium", "high"])
def test_the_simulator_counts_gemini_as_the_client_estimates(model, level):
    for w, h in SIZES:
        assert server_gemini_image_cost(model, f"MEDIA_RESOLUTION_{level.upper()}", [(w, h)]) == \
            gemini_image_tokens(w, h, model, level)
