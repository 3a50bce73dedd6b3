"""The site of `evalkit view` rendered by headless Chromium (Debian's `chromium`, driven by Playwright).

Opened from file:// with Chromium's default security (no flag relaxes it: data must arrive as
<script> chunks). With CI=true a missing Chromium or Playwright fails these tests; elsewhere they
skip with the reason. One browser serves the module; each test opens its own page.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from PIL import Image
from test_view import MODELS, two_runs

from evalkit.metrics.basic import outcome
from evalkit.rundir.layout import RunDir
from evalkit.view.site import build_site

CHROMIUM = Path(os.environ.get("EVALKIT_CHROMIUM") or "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
LONG_ID = "q00001"
LONG = "x" * 1500 + " 一二三四五六七八九十" * 60 + " https://example.org/" + "a/" * 300


def _need(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI=true: the browser tests must run; .ci/run installs chromium)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser(request):
    """Started after the site is built (Playwright's sync API holds an event loop; the runs need their own)."""
    if not CHROMIUM.exists():
        _need(f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set EVALKIT_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("playwright is not installed (pip install -e '.[dev]')")
    request.getfixturevalue("site")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Two models' runs; one answer made long, unbroken and partly Chinese; the site built from them."""
    folder = tmp_path_factory.mktemp("view-browser")
    data, dirs = two_runs(folder)
    rundir = RunDir(dirs[1])
    records = rundir.load_records()
    first = next(q for q, r in records.items() if r.base_id == LONG_ID)
    records[first].response = LONG
    rundir.rewrite_records(records.values())
    build_site(dirs, folder / "site")
    return folder / "site", data, [RunDir(d).load_records() for d in dirs]


def _open(browser, site_dir: Path, fragment: str = "", width: int = 1200):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((site_dir / "index.html").as_uri() + fragment)
    page.wait_for_selector("main h1")
    return page, errors


def test_leaderboard_names_every_model(browser, site):
    page, errors = _open(browser, site[0])
    board = page.locator("main table").first.inner_text()
    for model in MODELS:
        assert model in board
    assert "95% CI" in board and page.locator("#nav-overview").get_attribute("aria-current") == "page"
    assert errors == []
    page.close()


def test_deep_link_shows_the_question_both_answers_and_its_image(browser, site):
    site_dir, data, records = site
    page, errors = _open(browser, site_dir, f"#item={LONG_ID}")
    page.wait_for_selector("h1.qid")
    assert page.locator("h1.qid").inner_text() == LONG_ID
    question = next(line for line in data.read_text().splitlines() if f'"{LONG_ID}"' in line)
    assert page.locator("p.question").first.inner_text() == re.search(r'"question": "([^"]+)"', question).group(1)
    first = page.locator("section.variant").first
    shown = first.locator("pre.resp").all_inner_texts()
    qid = first.locator(".mono").first.inner_text()
    assert shown == [records[0][qid].response, records[1][qid].response] and shown[1] == LONG
    img = page.locator("main img").first
    assert img.get_attribute("src").startswith("thumbs/")
    assert page.evaluate("el => el.complete && el.naturalWidth > 0", img.element_handle())
    assert page.locator("figcaption a").first.get_attribute("href").endswith("images/img00001.png")
    assert errors == []
    page.close()


def test_a_filter_changes_the_rows_shown(browser, site):
    site_dir, _, records = site
    page, _ = _open(browser, site_dir, "#view=samples")
    page.wait_for_selector("#rows li")
    assert page.locator("#rows li").count() == 12
    wrong = {r.base_id for recs in records for r in recs.values() if outcome(r) == "wrong"}
    page.select_option("#f-st", "wrong")
    page.wait_for_function(f"document.querySelectorAll('#rows li').length === {len(wrong)}")
    shown = page.locator("#rows li a.id").all_inner_texts()
    assert set(shown) == wrong and 0 < len(wrong) < 12
    page.select_option("#f-m", "1")  # wrong answers of the second model only
    b_wrong = {r.base_id for r in records[1].values() if outcome(r) == "wrong"}
    page.wait_for_function(f"document.querySelectorAll('#rows li').length === {len(b_wrong)}")
    assert set(page.locator("#rows li a.id").all_inner_texts()) == b_wrong
    assert "st=wrong" in page.evaluate("location.hash")  # the filter is part of the shareable address
    page.close()


@pytest.mark.parametrize("fragment", ["", "#view=samples", f"#item={LONG_ID}"])
def test_no_horizontal_scroll_at_400px(browser, site, fragment):
    page, _ = _open(browser, site[0], fragment, width=400)
    page.wait_for_timeout(50)
    scroll, client = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert scroll <= client == 400
    page.close()


def test_j_and_k_move_between_samples(browser, site):
    page, _ = _open(browser, site[0], "#item=q00000")
    page.wait_for_selector("h1.qid")
    page.keyboard.press("j")
    page.wait_for_function("document.querySelector('h1.qid') && document.querySelector('h1.qid').textContent === 'q00001'")
    assert page.evaluate("location.hash") == "#item=q00001"
    page.keyboard.press("j")
    page.wait_for_function("document.querySelector('h1.qid').textContent === 'q00002'")
    page.keyboard.press("k")
    page.wait_for_function("document.querySelector('h1.qid').textContent === 'q00001'")
    page.keyboard.press("u")  # back to the list, where j/k move the cursor and Enter opens
    page.wait_for_selector("#rows li")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('h1.qid') && document.querySelector('h1.qid').textContent === 'q00001'")
    page.close()


_COLOURS = """() => {
  const pick = ["body", "main h1", "p.question", ".muted", "a", "th", "td", ".facts dt", ".facts dd", "pre.resp",
                ".badge.s-correct", ".badge.s-wrong", ".badge.s-unparsed", ".options li.gold", "summary", "figcaption",
                ".foot", "kbd", "button"];
  const out = [];
  const bg = el => { for (; el; el = el.parentElement) { const c = getComputedStyle(el).backgroundColor;
                       if (c && !/rgba\\(.*,\\s*0\\)$/.test(c) && c !== "transparent") return c; } return "rgb(255, 255, 255)"; };
  for (const sel of pick) for (const el of document.querySelectorAll(sel)) {
    if (!el.textContent.trim() || !el.getClientRects().length) continue;
    out.push([sel, getComputedStyle(el).color, bg(el)]); break; }
  return out;
}"""


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(float(x) for x in re.findall(r"[\d.]+", css)[:3])


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: str, bg: str) -> float:
    a, b = sorted((_luminance(_rgb(fg)), _luminance(_rgb(bg))), reverse=True)
    return (a + 0.05) / (b + 0.05)


def test_text_contrast_is_at_least_4_5(browser, site):
    seen = {}
    for fragment in ("", "#view=samples", f"#item={LONG_ID}"):
        page, _ = _open(browser, site[0], fragment)
        page.wait_for_timeout(50)
        for sel, fg, bg in page.evaluate(_COLOURS):
            seen[(fragment, sel)] = (fg, bg, contrast(fg, bg))
        page.close()
    low = {k: v for k, v in seen.items() if v[2] < 4.5}
    assert low == {}
    checked = {sel for _, sel in seen}
    assert {"body", "a", "pre.resp", ".badge.s-correct", ".badge.s-wrong", ".muted", "th"} <= checked


def test_screenshot_is_not_blank(browser, site):
    page, _ = _open(browser, site[0], f"#item={LONG_ID}")
    page.wait_for_selector("main img")
    page.wait_for_function("document.querySelector('main img').complete")
    png = page.screenshot()
    page.close()
    with Image.open(io.BytesIO(png)) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50
    most = max(n for n, _ in colours)
    assert most < 0.95 * sum(n for n, _ in colours)  # not one flat colour
