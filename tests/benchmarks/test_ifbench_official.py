"""IF-Bench `--mode official` = casiatao/IF-Bench@fc784fc: the request text of every prompt variant in
both languages, byte for byte, the extractor's request and how its reply is used, robust mode apart.

The expected request texts are built here from the official prompt constants, read with `ast` from the
official evaluate/bench_evaluate.py (the project's shared folder; skipped when absent), with the
official construction: `.replace("<input_question>", str(q)).replace("<input_options>", str(options))`
over the options dict of circular shift i. They are compared with what evalkit expands and, for a
full CLI run, with the request bodies the simulated server receives.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from synthetic_data import FIXTURES, SHARED_DATA

from evalkit.benchmarks.ifbench import IFBench
from evalkit.benchmarks.ifbench_judge import after_think
from evalkit.benchmarks.prepare import prepare
from evalkit.cli import main as cli_main
from evalkit.core.resources import read_prompt
from evalkit.core.types import ImagePart, Query, TextPart
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.openai import dialect as sim_dialects  # where the OpenAI dialect reads a body
from evalkit.sim.server import SimConfig, SimThread

OFFICIAL_FILE = SHARED_DATA.parent / "official" / "ifb_bench_evaluate.py"
V010_RECORDS = (FIXTURES / "v010" / "if-bench" / "runs" / "if-bench-vllm_sim-model-4dc8cf578e"
                / "records.jsonl")
# evaluate/qwen3_infer.py `llm_check_infer` at casiatao/IF-Bench@fc784fc: its `system_prompt` literal (not in the
# shared folder's copies, so transcribed here; note the leading newline and the final "\n    ").
OFFICIAL_EXTRACTOR = (
    '\n    You are a professional large model. You will receive responses from a model to single-choice questions. '
    'The options for each question are A, B, C, and D. Please determine which option (A, B, C, or D) the response '
    'considers to be the correct answer. If you believe that none of the options A, B, C, or D are present in the '
    'response, please reply with "F".\n    Remember, you can only reply with one of the characters A, B, C, D, or F. '
    'Do not output anything else.\n    Input: <input_response>\n    '
)
# evalkit's flags -> the official code's (transed_img_path given, rgbt_pair, use_prior)
VARIANTS: dict[str, dict[str, Any]] = {
    "normal": {},
    "prior": {"prior": True},
    "translated": {"translated": True},
    "translated+prior": {"translated": True, "prior": True},
    "pair": {"genvip": True},
    "prior_pair": {"genvip": True, "prior": True},
}


@pytest.fixture(scope="module")
def official() -> dict[str, str]:
    """The ten `evaluate_prompt_*` string constants of the official file, by name (no import of it)."""
    if not OFFICIAL_FILE.is_file():
        pytest.skip(f"official IF-Bench code not present at {OFFICIAL_FILE}")
    out = {}
    for node in ast.parse(OFFICIAL_FILE.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith("evaluate_prompt_") and isinstance(node.value, ast.Constant)):
            out[node.targets[0].id] = node.value.value
    assert len(out) == 10
    return out


def official_templates(consts: dict[str, str], flags: dict[str, Any]) -> dict[str, str]:
    """bench_evaluate's choice of system_prompt_{cn,en}: prior+pair, prior, pair, then "translated"
    replacing whatever was chosen when a translation folder is given without the pair mode."""
    translated, pair, prior = bool(flags.get("translated")), bool(flags.get("genvip")), bool(flags.get("prior"))
    name = "prior_pair" if prior and pair else "prior" if prior else "pair" if pair else "normal"
    if translated and not pair:
        name = "translated"
    return {lang: consts[f"evaluate_prompt_{name}_{lang}"] for lang in ("en", "cn")}


def official_request(template: str, question: str, options: dict[str, str], answer: str, i: int) -> tuple[str, str]:
    """(prompt, answer) of circular shift i, constructed as bench_evaluate does."""
    ring = [options["A"], options["B"], options["C"], options["D"]]
    shown = {"A": ring[(4 - i) % 4], "B": ring[(4 - i + 1) % 4], "C": ring[(4 - i + 2) % 4], "D": ring[(4 - i + 3) % 4]}
    prompt = template.replace("<input_question>", str(question)).replace("<input_options>", str(shown))
    return prompt, "ABCD"[(i + "ABCD".index(answer)) % 4]


def text_of(q: Query) -> str:
    (text,) = [p.text for p in q.messages[0].parts if isinstance(p, TextPart)]
    return text


def expected_for(consts: dict[str, str], flags: dict[str, Any], q: Query, item_meta: dict[str, Any]) -> tuple[str, str]:
    lang, shift = q.variant["lang"], q.variant["shift"]
    template = official_templates(consts, flags)[lang]
    return official_request(template, item_meta[f"{lang}_question"], item_meta[f"{lang}_options"],
                            item_meta["answer"], shift)


# ---------------------------------------------------------------------------------------------
# requests


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_and_language_is_the_official_text(official, variant) -> None:
    flags = VARIANTS[variant]
    _, items, queries, *_ = prepare("if-bench", {"data": "sample", **dict(flags)})
    meta = {it.id: it.meta for it in items}
    assert len(queries) == 20 * 8 and {q.variant["lang"] for q in queries} == {"en", "cn"}
    for q in queries:
        prompt, answer = expected_for(official, flags, q, meta[q.item_id])
        assert text_of(q) == prompt, (variant, q.id)
        assert q.gold == answer and str(q.options) in prompt
        images = [p for p in q.messages[0].parts if isinstance(p, ImagePart)]
        names = [Path(str(p.ref.value)).parent.name for p in images]
        want = {"normal": ["infrared_imgs"], "prior": ["infrared_imgs"], "translated": ["translated_rgb_imgs"],
                "translated+prior": ["translated_rgb_imgs"], "pair": ["infrared_imgs", "translated_rgb_imgs"],
                "prior_pair": ["infrared_imgs", "translated_rgb_imgs"]}[variant]
        assert names == want and isinstance(q.messages[0].parts[-1], TextPart)  # images first, then the text


def test_options_dict_under_the_four_shifts(official) -> None:
    _, items, queries, *_ = prepare("if-bench", {"data": "sample", "lang": "en"})
    item = next(it for it in items if "The rider's body" in it.meta["en_options"].values())
    mine = sorted((q for q in queries if q.item_id == item.id), key=lambda q: q.variant["shift"])
    literals = [text_of(q).rsplit("The input options are: ", 1)[1] for q in mine]
    assert literals == [  # str() of the dict: a value holding ' is double-quoted
        "{'A': 'The pole', 'B': 'The ground', 'C': \"The rider's body\", 'D': 'The surrounding plants'}.\n",
        "{'A': 'The surrounding plants', 'B': 'The pole', 'C': 'The ground', 'D': \"The rider's body\"}.\n",
        "{'A': \"The rider's body\", 'B': 'The surrounding plants', 'C': 'The pole', 'D': 'The ground'}.\n",
        "{'A': 'The ground', 'B': \"The rider's body\", 'C': 'The surrounding plants', 'D': 'The pole'}.\n",
    ]
    for q in mine:
        assert text_of(q) == expected_for(official, {}, q, item.meta)[0]


def test_placeholders_are_replaced_in_the_official_order() -> None:
    from evalkit.benchmarks.ifbench import fill, official_fill

    # the official code replaces the question first, then the options in the result
    assert official_fill("<input_question> | <input_options>", "Q <input_options>?", {"A": "x"}) == \
        "Q {'A': 'x'}? | {'A': 'x'}"
    assert fill("<input_question> | <input_options>", "Q <input_options>?", {"A": "x"}) == \
        "Q <input_options>? | {'A': 'x'}"  # the paper variant keeps 0.1's one-pass fill


def test_paper_prompts_are_what_evalkit_010_sent() -> None:
    """`--if-prompt paper` reproduces 0.1.0's request texts (its recorded prompts, byte for byte)."""
    data = V010_RECORDS.parents[2] / "data" / "if-bench" / "if_bench_sample.json"
    _, _, queries, *_ = prepare("if-bench", {"data": str(data), "if_prompt": "paper"})
    by_id = {q.id: q for q in queries}
    records = [json.loads(line) for line in V010_RECORDS.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 160
    for r in records:
        assert text_of(by_id[r["query_id"]]) == r["prompt"], r["query_id"]
    _, _, official_queries, *_ = prepare("if-bench", {"data": str(data)})
    assert all(text_of(q) != text_of(by_id[q.id]) for q in official_queries)


# ---------------------------------------------------------------------------------------------
# the extractor and its reply


def official_outcome(output: str, extractor_reply: str, answer: str) -> tuple[bool, bool]:
    """(asked the extractor, correct) as bench_evaluate + llm_check_infer decide, transcribed by hand:
    strip; after the last </think>, strip; a non-empty output not starting with A-D goes to the
    extractor, whose content (after its last </think>, "\\n" stripped) replaces the output only when
    it starts with A-D; the answer is the first character of whatever remains."""
    out = output.strip()
    if "</think>" in out:
        out = out.split("</think>")[-1].strip()
    asked = len(out) >= 1 and out[0] not in "ABCD"
    if asked:
        content = extractor_reply.split("</think>")[-1].strip("\n")
        if len(content) >= 1 and content[0] in "ABCD":
            out = content
    return asked, (out[:1] == answer if out else False)


def evalkit_outcome(bench: IFBench, q: Query, output: str, reply: str, mode: str) -> tuple[bool, bool]:
    parsed = bench.parse(q, output, mode)
    if parsed.method != "unparsed":
        return False, bool(bench.score(q, parsed))
    request = bench.judge_request(q, output, mode)
    if request is None:
        return False, False
    return True, bool(bench.score(q, bench.judge_verdict(q, output, reply, request.valid, mode)))


def _a_query(gold: str = "B") -> Query:
    _, _, queries, *_ = prepare("if-bench", {"data": "sample", "lang": "en"})
    return next(q for q in queries if q.gold == gold)


def test_extractor_request_is_the_official_one_byte_for_byte() -> None:
    assert read_prompt("extract", "if-bench.txt") == OFFICIAL_EXTRACTOR
    bench, q = IFBench(), _a_query()
    for reply in ("**B**", "  The answer is B.\n", "<think>A or B?</think>\n\n  option two ",
                  "<think>still thinking, maybe B", "b"):
        request = bench.judge_request(q, reply, "official")
        assert request is not None and request.valid == ("A", "B", "C", "D")
        # llm_check_infer: system_prompt.replace("<input_response>", output) with the output as the
        # first-character rule left it (stripped, after the last </think>; an unclosed block as is)
        assert request.prompt == OFFICIAL_EXTRACTOR.replace("<input_response>", after_think(reply)), reply
    unclosed = bench.judge_request(q, "<think>still thinking, maybe B", "official")
    assert unclosed is not None and "Input: <think>still thinking, maybe B\n    " in unclosed.prompt


def test_official_reply_rule_on_the_disagreement_shapes() -> None:
    """Expected values derived by hand from bench_evaluate.py (first character A-D, else keep the original
    output, whose first character is then not A-D: wrong) and qwen3_infer.py (content after the last
    </think> token, `.strip("\\n")`: spaces are kept)."""
    bench, q = IFBench(), _a_query("B")
    original = "The second one."  # first character "T": the extractor is asked
    cases = {  # extractor reply: (official answer, correct)
        "B": ("B", True),
        "B.": ("B", True),
        "\nB\n": ("B", True),  # only newlines are stripped
        " B": (None, False),  # a leading space: first character " ", the original "T" stays
        "The answer is D": (None, False),  # "T": the original "T" stays
        "The answer is B": (None, False),  # even when it names the right letter
        "Based on the response, D": ("B", True),  # "B" is the first character: counted as B
        "b": (None, False),  # case matters
        "F": (None, False),  # "none of them": the original stays, wrong
        "": (None, False),
        "<think>A or B...</think>C": ("C", False),  # thinking removed before the first character
        "<think>\n\n</think>\n\nB": ("B", True),
        "<think>B, I think": (None, False),  # unclosed: "<" is the first character
        "D\nbecause": ("D", False),
    }
    for reply, (answer, correct) in cases.items():
        verdict = bench.judge_verdict(q, original, reply, ("A", "B", "C", "D"), "official")
        assert verdict.answer == answer, repr(reply)
        assert verdict.method == ("llm" if answer else "llm_unresolved"), repr(reply)
        assert bool(bench.score(q, verdict)) is correct, repr(reply)
        assert evalkit_outcome(bench, q, original, reply, "official") == official_outcome(original, reply, "B")


def test_whole_official_decision_matches_a_transcription() -> None:
    bench, q = IFBench(), _a_query("C")
    outputs = ["C", "A", "Answer: C", "**C**", " c ", "", "   ", "<think>A</think>C", "<think>A</think>",
               "<think>unfinished C", "</think>\n  the third  ", "选C", "I cannot tell.", "(C)"]
    replies = ["C", " C", "c", "F", "", "The answer is C", "C.", "<think>x</think>C", "<think>C", "\n\nC"]
    for output in outputs:
        for reply in replies:
            assert evalkit_outcome(bench, q, output, reply, "official") == official_outcome(output, reply, "C"), \
                (output, reply)


def test_robust_mode_keeps_its_lenient_reading_and_no_thinking_for_the_extractor() -> None:
    bench, q = IFBench(), _a_query("B")
    request = bench.judge_request(q, "<think>maybe A</think>\n the second one", "robust")
    assert request is not None and request.valid == ("A", "B", "C", "D", "F")
    assert request.prompt == read_prompt("extract", "if-bench-paper.txt").replace("<input_response>", "the second one")
    assert "<think>" not in request.prompt and "maybe A" not in request.prompt
    assert bench.judge_request(q, "<think>maybe B, still thinking", "robust") is None  # only thinking: not shown
    lenient = {" B": "B", "The answer is B": "B", "F": "F", "b": None, "<think>A</think>B": "B", "": None,
               "<think>B, I think": "B"}
    for reply, answer in lenient.items():
        assert bench.judge_verdict(q, "x", reply, request.valid, "robust").answer == answer, repr(reply)


# ---------------------------------------------------------------------------------------------
# a full CLI run: the bodies the server receives


def test_cli_run_sends_the_official_bytes(official, tmp_path, monkeypatch, no_plots) -> None:
    bodies: list[dict[str, Any]] = []
    original = sim_dialects.parse_body

    def recording(body: Any):  # the JSON body as the simulated server decoded it
        bodies.append(body)
        return original(body)

    monkeypatch.setattr(sim_dialects, "parse_body", recording)
    _, items, queries, *_ = prepare("if-bench", {"data": "sample"})
    meta = {it.id: it.meta for it in items}
    key = answer_key_for("if-bench", {"data": "sample"})
    replies = {0: "**C**", 1: "The answer is D", 2: "<think>A or B, still thinking", 3: "<think>x</think>\n  answer: B  "}
    for i, text in replies.items():
        key.entries[i].reply = text
    with SimThread(SimConfig(answer_key=key)) as sim:
        argv = ["run", "if-bench", "--data", "sample", "--model", "vllm/sim-model", "--base-url", sim.url, "--out", str(tmp_path / "run"),
                "--no-cache", "--no-progress", "--judge", "vllm/sim-model", "--judge-base-url", sim.url]
        assert cli_main(argv) == 0
    texts = []
    for body in bodies:
        (message,) = body["messages"]
        content = message["content"]
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts.append(("".join(p["text"] for p in parts if p["type"] == "text"),
                      sum(p["type"] == "image_url" for p in parts)))
    # every query's official text with its one image, as often as queries have it (a question and its
    # options recur on different images)
    expected = Counter((expected_for(official, {}, q, meta[q.item_id])[0], 1) for q in queries)
    assert Counter(t for t in texts if t[1] == 1) == expected and len(expected) > 100
    judged = [t for t, n in texts if n == 0]
    expected_judge = sorted(OFFICIAL_EXTRACTOR.replace("<input_response>", after_think(r)) for r in replies.values())
    assert sorted(judged) == expected_judge and len(texts) == 160 + 4
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["official_source"] == "casiatao/IF-Bench@fc784fc (evaluate/bench_evaluate.py, evaluate/qwen3_infer.py)"
    assert any("Qwen3-8B" in d for d in summary["deviations"])
    records = {r["query_id"]: r for r in map(json.loads, (tmp_path / "run" / "records.jsonl").read_text().splitlines())}
    got = {i: (records[queries[i].id]["parsed"], records[queries[i].id]["parse_method"]) for i in replies}
    # the simulated judge names the one letter it finds, "F" for two or none
    assert got == {0: ("C", "llm"), 1: ("D", "llm"), 2: (None, "llm_unresolved"), 3: ("B", "llm")}
    assert summary["metrics"]["prompt_set"] == "official"


def test_paper_prompts_on_the_010_cache_cost_nothing(tmp_path, monkeypatch) -> None:
    """A new run with `--if-prompt paper` on the cache 0.1.0 wrote: every request is a hit."""
    from test_v010_compat import _ask, _case, _installed, _sim

    case = _case("if-bench")
    with _installed("if-bench") as where:
        monkeypatch.chdir(where)
        with _sim(case) as sim:
            assert _ask(case, ["--if-prompt", "paper", "--out", str(tmp_path / "paper")]) == 0
            assert sim.counters.snapshot()["requests"] == 0
    summary = json.loads((tmp_path / "paper" / "summary.json").read_text())
    assert summary["metrics"]["prompt_set"] == "paper" and summary["n_queries"] == 160
    assert summary["metrics"]["Avg"] == pytest.approx(case["summary"]["metrics"]["Avg"])


def test_translation_is_found_by_file_name_alone(tmp_path) -> None:
    """bench_evaluate joins only the base name of dst_thermal_path to the translation folder."""
    from evalkit.core.resources import dataset_path

    sample = dataset_path("if-bench", "if_bench_sample.json")
    raw = json.loads(sample.read_text(encoding="utf-8"))
    item = next(iter(raw.values()))[0]
    name = item["dst_thermal_path"]
    item["dst_thermal_path"] = f"sub/{name}"
    (tmp_path / "ir" / "sub").mkdir(parents=True)
    (tmp_path / "rgb").mkdir()
    (tmp_path / "ir" / "sub" / name).write_bytes((sample.parent / "infrared_imgs" / name).read_bytes())
    (tmp_path / "rgb" / name).write_bytes((sample.parent / "translated_rgb_imgs" / name).read_bytes())
    data = tmp_path / "one.json"
    data.write_text(json.dumps([item], ensure_ascii=False), encoding="utf-8")
    (loaded,) = IFBench().load(data, tmp_path / "ir", {"genvip": True, "translated_images": str(tmp_path / "rgb")})
    assert [Path(str(r.value)) for r in loaded.images] == [tmp_path / "ir" / "sub" / name, tmp_path / "rgb" / name]
