"""`evalkit view` as a newcomer met it (issue 35 item 4), at 400 px wide in headless Chromium.

(a) The overview's tables wrapped one letter per line at 400 px (the page's `overflow-wrap: anywhere`
    let a column shrink to one character): now words stay whole and a wide table scrolls inside its
    own box, never the page.
(b) The run's lint findings (lint.json) were not shown anywhere near the questions they name: now each
    affected question's row and page carry them.
(c) A preamble every question shares (RGB-Th-Bench's fixed instructions, here a long first line) filled
    the samples list's two lines per row: the list shows the part after it, with an ellipsis; the
    question's page keeps the full text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_data import draw_image
from test_view import script_data
from test_view_browser import ARGS, CHROMIUM, _need

from evalkit.core.resources import read_prompt
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread
from evalkit.view.preamble import distinctive, preamble_lengths
from evalkit.view.site import build_site

PREAMBLE = "Look closely at the picture below and think about what a careful observer would notice first.\n"
N_ITEMS = 6
FLAGGED = "q2"  # options A and B both read "red": lint's duplicate-option warning names it


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("newcomer-view")
    (folder / "images").mkdir()
    lines = []
    for i in range(N_ITEMS):
        draw_image(i, 48).save(folder / f"images/img{i}.png")
        options = {"A": "red", "B": "red" if f"q{i}" == FLAGGED else "green", "C": "blue", "D": "yellow"}
        lines.append({"id": f"q{i}", "image": f"images/img{i}.png", "question": PREAMBLE + f"Which colour is shape {i}?",
                      "options": options, "answer": "C", "category": f"category number {i % 2}"})
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}),
                             params=SimParams(theta=0.5, seed=1))) as sim:
        res = run("mcq", "vllm/a-model-with-a-rather-long-name", data=str(data), base_url=sim.url,
                  out=str(folder / "run"), no_cache=True, progress=False, plots=False)
    return build_site([res.out_dir], folder / "site").out


def test_rows_show_the_distinctive_part_and_the_findings(site):
    _, _, meta = script_data(site / "data" / "meta.js")
    _, _, rows = script_data(site / "data" / "rows-000.js")
    assert [r[1] for r in rows] == [f"\u2026Which colour is shape {i}?" for i in range(N_ITEMS)]
    assert meta["fq"] == {FLAGGED: [0]}
    assert meta["fd"][0][:2] == ["warning", "duplicate-option"] and "'red'" in meta["fd"][0][2]
    _, _, items = script_data(site / "data" / "items-000.js")
    assert items[0]["q"] == PREAMBLE + "Which colour is shape 0?"  # the question's page: the full text


def test_preamble_is_cut_at_a_line_break_and_ordinary_questions_are_kept():
    rgb, pair = (read_prompt("rgb-th-bench", f) for f in ("rgb.txt", "pair.txt"))
    asked = ["Is the main object round?", "Is the main object blue?", "Is the sky clear?", "Are there cats?"]
    prompts = [t.replace("{question}", q) for t in (rgb, pair) for q in asked]
    plain = ["Is this correct: there is the exact number 120 at the top left specifically referring to voltage?",
             "Is this correct: there is the exact number 220 at the top left specifically referring to voltage?",
             "Is this correct: there is the exact number 380 at the top left specifically referring to voltage?",
             "Short?"]
    cuts = preamble_lengths(prompts + plain)
    assert [distinctive(p, cuts.get(p, 0)) for p in prompts] == ["\u2026" + q for q in asked] * 2
    assert not any(p in cuts for p in plain)  # a shared start inside the question itself stays (< 60 chars to a space)
    assert preamble_lengths(prompts[:2]) == {}  # two texts are no pattern


def test_view_at_400px_tables_findings_and_samples(site):
    """One page load at 400 px: overview tables, then the samples list, then the flagged question."""
    if not CHROMIUM.exists():
        _need(f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set EVALKIT_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((site / "index.html").as_uri())
            page.wait_for_selector("main table")
            tables = page.evaluate(_TABLES)
            assert len(tables["narrow"]) == 0, tables["narrow"]  # no text cell squeezed below three characters
            assert tables["n"] >= 3 and tables["uncontained"] == 0 and tables["wider"] >= 1  # some scroll in their box
            assert page.evaluate("document.documentElement.scrollWidth") <= 400  # never the page

            page.evaluate("location.hash = '#view=samples'")
            page.wait_for_selector("#rows li")
            shown = page.locator("#rows li p.q").all_inner_texts()
            assert shown == [f"\u2026Which colour is shape {i}?" for i in range(N_ITEMS)]
            flags = page.locator("#rows li .flag")
            assert flags.count() == 1 and "duplicate-option (warning)" in flags.first.inner_text()
            assert page.locator("#rows li").nth(2).locator(".flag").count() == 1  # on q2's row
            page.fill("#f-q", "duplicate-option")  # the kind is searchable
            page.wait_for_function("document.querySelectorAll('#rows li').length === 1")
            assert page.locator("#rows li a.id").all_inner_texts() == [FLAGGED]

            page.evaluate(f"location.hash = '#item={FLAGGED}'")
            page.wait_for_selector("h1.qid")
            box = page.locator("section.findings").inner_text()
            assert "warning \u00b7 duplicate-option" in box and "same text 'red'" in box and "data.jsonl" in box
            assert page.locator("p.question").first.inner_text().startswith("Look closely at the picture")
            assert errors == []
        finally:
            browser.close()


_TABLES = """() => {
  const zero = document.createElement("span"); zero.textContent = "000";
  document.querySelector("main td").appendChild(zero);
  const three = zero.getBoundingClientRect().width; zero.remove();
  const out = {n: 0, uncontained: 0, wider: 0, narrow: []};
  for (const t of document.querySelectorAll("main table")) {
    out.n++;
    const box = t.parentElement, style = getComputedStyle(box);
    if (!["auto", "scroll"].includes(style.overflowX) || box.clientWidth > 400) out.uncontained++;
    if (box.scrollWidth > box.clientWidth) out.wider++;
    for (const c of t.querySelectorAll("th, td")) {
      if (!c.textContent.trim()) continue;
      const s = getComputedStyle(c);
      const inner = c.getBoundingClientRect().width - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
      const probe = document.createElement("span");  // the text on one line: a short one needs less than three
      probe.style.cssText = "position:absolute;white-space:nowrap"; probe.textContent = c.textContent.trim();
      c.appendChild(probe); const natural = probe.getBoundingClientRect().width; probe.remove();
      if (inner < Math.min(three, natural) - 0.5) out.narrow.push([c.textContent, inner, three]);
    }
  }
  return out;
}"""
