"""IF-Bench: loader, prompts, circular x language variants, official/robust judgment, metrics, GenViP.

The acceptance runs on the real question file are in test_ifbench_real.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.ifbench import JUDGE_VALID, IFBench, fill, options_dict_str, parse_langs
from evalkit.benchmarks.ifbench_judge import extractor_prompt, judgment_counts, official_rule, robust_rule
from evalkit.benchmarks.prepare import prepare
from evalkit.cli import main as cli_main
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Parsed, Record
from evalkit.core.resources import dataset_path, read_prompt
from evalkit.engine.evaluate import run
from evalkit.grading.extract import parse_judge_reply
from evalkit.metrics.ifbench import IFBenchScored, ifbench_metrics
from evalkit.protocols.circular import all_shifts, circular_summary, shift_options
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams, judge_answer
from evalkit.sim.server import SimConfig, SimThread

SAMPLE = dataset_path("if-bench", "if_bench_sample.json")
# ---------------------------------------------------------------------------------------------
# circular protocol


def test_circular_direction_and_gold_follow_the_official_code() -> None:
    opts = {"A": "a", "B": "b", "C": "c", "D": "d"}
    shown, gold = shift_options(opts, "B", 1)
    assert list(shown.values()) == ["d", "a", "b", "c"]  # shift 1 shows D, A, B, C
    assert gold == "C"  # ABCD[(1 + 1) % 4]
    assert [g for _, _, g in all_shifts(opts, "D")] == ["D", "A", "B", "C"]
    for i, shown, gold in all_shifts(opts, "A"):
        assert shown[gold] == "a" and list(shown) == list("ABCD") and i in range(4)
    # any number of options
    three = all_shifts({"A": "x", "B": "y", "C": "z"}, "C")
    assert [(list(s.values()), g) for _, s, g in three] == [
        (["x", "y", "z"], "C"), (["z", "x", "y"], "A"), (["y", "z", "x"], "B")]
    assert len(all_shifts({k: k for k in "ABCDE"}, "E")) == 5


def test_mcq_circular_flag(tmp_path: Path, no_plots) -> None:
    from synthetic_data import make_mcq_jsonl

    data = make_mcq_jsonl(tmp_path / "ds", 10)
    _, items, queries, *_ = prepare("mcq", {"data": str(data), "circular": True})
    assert len(items) == 10 and len(queries) == 40
    assert {q.variant["shift"] for q in queries} == {0, 1, 2, 3}
    assert all(q.options[q.gold] == items[int(q.item_id[1:])].options[items[int(q.item_id[1:])].answer]
               for q in queries)
    recs = [Record(q.id, q.item_id, q.base_id, q.variant, "m", "", "x", q.gold, correct=q.variant["shift"] != 3
                   or q.item_id == "q00000") for q in queries]
    m = circular_summary(recs)
    assert m["circular_accuracy"] == pytest.approx(10.0) and m["circular_mean"] == pytest.approx(77.5)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data), "circular": True}),
                             params=SimParams(style="first"))) as sim:
        res = run("mcq", "vllm/sim-model", data=str(data), circular=True, base_url=sim.url,
                  out=str(tmp_path / "run"), no_cache=True, progress=False)
    assert res.summary["n_queries"] == 40
    assert res.summary["metrics"]["accuracy"] == 25.0 and res.summary["metrics"]["circular_accuracy"] == 0.0


# ---------------------------------------------------------------------------------------------
# loader


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


def test_loads_dict_and_flat_forms_tolerating_extra_keys(tmp_path: Path) -> None:
    raw = json.loads(SAMPLE.read_text(encoding="utf-8"))
    assert any("pos_info" in x for v in raw.values() for x in v)
    assert any("original_answer" in x["question"] for v in raw.values() for x in v)
    images = SAMPLE.parent / "infrared_imgs"
    bench = IFBench()
    items = bench.load(SAMPLE, images, {})
    flat = [x for v in raw.values() for x in v]
    random.Random(1).shuffle(flat)
    items_flat = bench.load(_write(tmp_path / "flat.json", flat), images, {})
    assert len(items) == len(items_flat) == 20
    key = lambda it: (str(it.images[0].value), it.question, tuple(it.options.items()), it.answer, it.category)  # noqa: E731
    assert sorted(map(key, items)) == sorted(map(key, items_flat))
    assert items[0].id == "SU-001" and items[2].id == "IT-001"
    assert len({it.id for it in items}) == 20


def test_bad_rows_and_missing_images_are_clear_errors(tmp_path: Path) -> None:
    raw = json.loads(SAMPLE.read_text(encoding="utf-8"))
    dim = next(iter(raw))
    broken = json.loads(json.dumps(raw))
    broken[dim][1]["question"]["answer"] = "E"
    with pytest.raises(EvalkitError, match=rf"dimension '{dim}' item 2: answer 'E'"):
        IFBench().load(_write(tmp_path / "bad.json", broken), SAMPLE.parent / "infrared_imgs", {})
    images = tmp_path / "imgs"
    images.mkdir()
    for p in (SAMPLE.parent / "infrared_imgs").iterdir():
        if p.name != "ir_003.png":
            (images / p.name).write_bytes(p.read_bytes())
    with pytest.raises(EvalkitError, match=r"image not found: .*ir_003\.png"):
        IFBench().load(SAMPLE, images, {})
    bench = IFBench()
    items = bench.load(SAMPLE, images, {"skip_missing": True})
    assert len(items) == 18 and len(bench.skipped) == 2  # two questions use that image
    res = simulate_sample_run(tmp_path, images=str(images), skip_missing=True)
    assert res.summary["metrics"]["skipped_missing_images"] == 2
    assert res.summary["n_items"] == 18 and res.summary["n_queries"] == 144


def simulate_sample_run(tmp_path: Path, **opts):
    with SimThread(SimConfig(answer_key=answer_key_for("if-bench", {"data": "sample", **opts}))) as sim:
        return run("if-bench", "vllm/sim-model", data="sample", base_url=sim.url, out=str(tmp_path / "sample-run"),
                   no_cache=True, progress=False, **opts)


# ---------------------------------------------------------------------------------------------
# prompts


def test_paper_prompt_files_are_the_papers_figures() -> None:
    """`--if-prompt paper` (0.1's requests); the official strings are tested in test_ifbench_official.py."""
    normal = read_prompt("if-bench", "paper_normal_en.txt")
    assert normal.startswith("You are a professional multimodal large language model assistant.")
    assert "1. One infrared image.\n2. One question related to the image." in normal
    assert normal.endswith("The input question is: <input_question>.\nThe input options are: <input_options>.")
    assert len(normal.splitlines()) == 17
    pair = read_prompt("if-bench", "paper_pair_en.txt")
    assert "1. One infrared image and one corresponding RGB image. The RGB image is translated" in pair
    prior = read_prompt("if-bench", "paper_prior_en.txt")
    assert prior.startswith(normal + "\n\nWhen completing the above tasks, please refer to the following prior")
    assert read_prompt("if-bench", "paper_prior_pair_en.txt").startswith(pair + "\n\nWhen completing the above tasks")
    for kind in ("normal", "pair", "prior", "prior_pair", "translated"):
        for prefix in ("", "paper_"):
            cn = read_prompt("if-bench", f"{prefix}{kind}_cn.txt")
            assert "<input_question>" in cn and "<input_options>" in cn and "红外" in cn
    fig11 = read_prompt("extract", "if-bench-paper.txt")  # robust mode's extractor prompt
    assert fig11.startswith("You are a professional large model. You will receive responses")
    assert fig11.endswith("\n\nInput: <input_response>")


def test_apostrophe_option_is_double_quoted_in_every_shift() -> None:
    _, _, queries, *_ = prepare("if-bench", {"data": "sample", "lang": "en"})
    mine = [q for q in queries if "The rider's body" in q.options.values()]
    assert len(mine) == 4
    literal = "{'A': 'The pole', 'B': 'The ground', 'C': \"The rider's body\", 'D': 'The surrounding plants'}"
    s0 = next(q for q in mine if q.variant["shift"] == 0)
    assert f"The input options are: {literal}." in s0.prompt_text()
    for q in mine:
        assert f"The input options are: {str(q.options)}." in q.prompt_text()
        assert "\"The rider's body\"" in q.prompt_text()
    s1 = next(q for q in mine if q.variant["shift"] == 1)
    assert "{'A': 'The surrounding plants', 'B': 'The pole', 'C': 'The ground', 'D': \"The rider's body\"}" \
        in s1.prompt_text() and s1.gold == "D"
    assert options_dict_str({"A": "it's"}) == "{'A': \"it's\"}"
    assert fill("<input_question> <input_options>", "Q <input_options>?", {"A": "x"}) == "Q <input_options>? {'A': 'x'}"


def test_query_shape_ids_and_language_text() -> None:
    _, items, queries, *_ = prepare("if-bench", {"data": "sample", "if_prompt": "paper"})
    assert len(items) == 20 and len(queries) == 160
    q = queries[0]
    assert q.id == f"{q.item_id}|s0|en" and q.base_id == q.item_id and q.variant == {"shift": 0, "lang": "en"}
    assert len(q.messages) == 1 and q.messages[0].role == "user"
    assert type(q.messages[0].parts[0]).__name__ == "ImagePart" and type(q.messages[0].parts[-1]).__name__ == "TextPart"
    cn = next(x for x in queries if x.item_id == q.item_id and x.variant == {"shift": 0, "lang": "cn"})
    assert "输入的问题是：" + items[0].meta["cn_question"] in cn.prompt_text()
    assert str(items[0].meta["cn_options"]) in cn.prompt_text()
    assert parse_langs("en") == ("en",) and parse_langs(None) == ("en", "cn")
    with pytest.raises(EvalkitError):
        parse_langs("fr")


# ---------------------------------------------------------------------------------------------
# judgment (golden)


def test_golden_parser_rules() -> None:
    assert official_rule("C") == Parsed("C", "first_char")
    assert official_rule("Answer: C") == Parsed("A", "first_char")  # the official quirk
    assert robust_rule("Answer: C").answer == "C"
    assert official_rule("**C**") == Parsed(None, "unparsed")  # -> extractor
    assert official_rule("<think>maybe A</think> B") == Parsed("B", "first_char")
    assert official_rule("</think> B").answer == "B"
    assert official_rule("  ") == Parsed("", "empty")
    assert robust_rule("**C**").answer == "C"
    assert robust_rule("I'm sorry, I cannot help with that.").refusal
    prompt = extractor_prompt("<think>x</think> **C**")
    assert prompt is not None and prompt.endswith("Input: **C**\n    ")  # the official prompt's tail
    assert judge_answer("if-bench", prompt) == "C"
    assert judge_answer("if-bench", extractor_prompt("I cannot tell.")) == "F"
    robust = extractor_prompt("<think>x</think> **C**", "robust")
    assert robust is not None and robust.endswith("\nInput: **C**") and judge_answer("if-bench", robust) == "C"
    assert parse_judge_reply("F", JUDGE_VALID) == "F"  # robust: scored wrong
    assert parse_judge_reply("C", JUDGE_VALID) == "C"


def _replay_run(tmp_path: Path, replies: dict[int, str], name: str, **opts):
    """The bundled sample, with chosen queries answered by fixed texts (replay entries)."""
    _, _, queries, *_ = prepare("if-bench", {"data": "sample"})
    key = answer_key_for("if-bench", {"data": "sample"})
    for i, text in replies.items():
        key.entries[i].reply = text
    with SimThread(SimConfig(answer_key=key)) as sim:
        judge = {"judge": "vllm/sim-model", "judge_base_url": sim.url} if opts.pop("with_judge", True) else {}
        res = run("if-bench", "vllm/sim-model", data="sample", base_url=sim.url, out=str(tmp_path / name), no_cache=True,
                  progress=False, max_attempts=2, **judge, **opts)
        requests = sim.counters.snapshot()["requests"]
    by_id = {r.query_id: r for r in res.records}
    return res, [by_id[queries[i].id] for i in sorted(replies)], queries, requests


def test_golden_answers_end_to_end_with_the_extractor(tmp_path: Path) -> None:
    replies = {0: "C", 1: "Answer: C", 2: "**C**", 3: "<think>hmm</think> B", 4: "", 5: "I cannot tell."}
    res, recs, queries, _ = _replay_run(tmp_path, replies, "official")
    got = [(r.parsed, r.parse_method, r.correct) for r in recs]
    golds = [queries[i].gold for i in sorted(replies)]
    assert got[0] == ("C", "first_char", golds[0] == "C")
    assert got[1] == ("A", "first_char", golds[1] == "A")
    assert got[2] == ("C", "llm", golds[2] == "C")
    assert got[3] == ("B", "first_char", golds[3] == "B")
    assert got[4] == ("", "empty", False)
    assert got[5] == (None, "llm_unresolved", False)  # official: the extractor's "F" is not A-D
    j = res.summary["metrics"]["judgment"]
    assert j["extractor_used"] == 2 and j["official_needs_extractor"] == 2 and j["extractor_unresolved"] == 1
    assert j["robust_needs_extractor"] == 0  # robust: "**C**" is C, "I cannot tell." a refusal
    assert j["modes_differ"] == 1  # "Answer: C": A officially, C robustly
    assert res.summary["counts"]["unparsed"] == 1  # the "F": no answer, wrong (the official fallback is wrong too)
    robust, recs_r, _, _ = _replay_run(tmp_path, replies, "robust", mode="robust")
    assert recs_r[1].parsed == "C" and recs_r[2].parsed == "C" and recs_r[2].parse_method == "rule"
    assert recs_r[5].refusal and recs_r[5].parse_method == "refusal" and robust.summary["counts"]["refusals"] == 1
    assert robust.summary["metrics"]["judgment"]["extractor_used"] == 0


def test_without_judge_unparsed_answers_are_counted(tmp_path: Path) -> None:
    res, recs, _, requests = _replay_run(tmp_path, {2: "**C**"}, "nojudge", with_judge=False)
    assert recs[0].parsed is None and recs[0].parse_method == "unparsed" and recs[0].correct is False
    assert res.summary["counts"]["unparsed"] == 1 and res.summary["counts"]["correct"] == 159
    assert res.summary["metrics"]["judgment"]["unparsed_counted_wrong"] == 1
    assert "1 answers could not be parsed" in res.summary["hint"]
    assert requests == 160  # nothing spent on a judge nobody named


# ---------------------------------------------------------------------------------------------
# metrics


def test_metrics_unweighted_over_dimensions_and_strict() -> None:
    outs = []
    for item, dim, right in (("a1", "Scene Understanding", 4), ("a2", "Scene Understanding", 4),
                             ("a3", "Scene Understanding", 0), ("b1", "Object Counting", 3)):
        for lang in ("en", "cn"):
            outs += [IFBenchScored(item, dim, lang, s, s < right if lang == "en" else True) for s in range(4)]
    m = ifbench_metrics(outs, ("en", "cn"))
    assert m["dimensions_en"] == {"SU": pytest.approx(200 / 3), "OC": 75.0}
    assert m["Avg (en)"] == pytest.approx((200 / 3 + 75) / 2)  # unweighted, not (4+4+0+3)/16
    assert m["dimensions_strict_en"] == {"SU": pytest.approx(200 / 3), "OC": 0.0}
    assert m["Avg (cn)"] == 100.0 and m["Avg"] == pytest.approx(((200 / 3 + 75) / 2 + 100) / 2)
    assert m["Avg (strict)"] == pytest.approx(((200 / 3) / 2 + 100) / 2)
    c = m["consistency"]
    assert c["all_correct"] == 50.0 and c["all_wrong"] == 0.0 and c["variants_per_item"] == 8
    assert c["mean"] == pytest.approx(100 * (1 + 1 + 0.5 + 7 / 8) / 4)


# ---------------------------------------------------------------------------------------------
# GenViP


def test_translate_then_genvip_prior_queries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ir = SAMPLE.parent / "infrared_imgs"
    out = tmp_path / "translated"
    cache = str(tmp_path / "cache")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with SimThread(SimConfig()) as sim:
        argv = ["translate", "if-bench", "--images", str(ir), "--out", str(out), "--model", "openai/gpt-image-1",
                "--base-url", sim.url + "/v1", "--cache-dir", cache, "--no-progress"]
        assert cli_main(argv) == 0
        first = sim.counters.snapshot()["requests"]
        assert cli_main(argv) == 0
        assert cli_main([*argv[:5], str(tmp_path / "again"), *argv[6:]]) == 0  # new folder: from the cache
        second = sim.counters.snapshot()["requests"]
    n_in = len(list(ir.iterdir()))
    assert first == n_in == 14 and second == first
    outputs = sorted(p.name for p in out.iterdir() if p.suffix == ".png")
    assert outputs == sorted(p.name for p in ir.iterdir())
    assert len(list((tmp_path / "again").glob("*.png"))) == 14
    _, items, queries, *_ = prepare("if-bench", {"data": "sample", "genvip": True, "prior": True,
                                               "translated_images": str(out)})
    q = queries[0]
    parts = q.messages[0].parts
    assert [type(p).__name__ for p in parts] == ["ImagePart", "ImagePart", "TextPart"]
    assert Path(str(parts[0].ref.value)).parent == ir and Path(str(parts[1].ref.value)).parent == out
    assert Path(str(parts[0].ref.value)).name == Path(str(parts[1].ref.value)).name
    text = q.prompt_text()
    assert "One infrared image and one corresponding RGB image" in text
    # the official layout: the prior between the task and the guidelines
    assert "which may cause brightness differences in the resulting images.\n\n    Evaluation Guidelines:" in text
    _, _, tq, *_ = prepare("if-bench", {"data": "sample", "translated": True, "prior": True})
    tparts = tq[0].messages[0].parts
    assert len(tparts) == 2 and "translated_rgb_imgs" in str(tparts[0].ref.value)
    assert "prior knowledge" not in tq[0].prompt_text()  # translated replaces prior without the pair


def test_bundled_sample_runs_out_of_the_box(tmp_path: Path) -> None:
    res = simulate_sample_run(tmp_path)
    assert res.summary["n_items"] == 20 and res.summary["n_queries"] == 160
    assert res.summary["metrics"]["Avg"] == 100.0
    gen = simulate_sample_run(tmp_path / "g", genvip=True)
    assert gen.summary["metrics"]["prompt"] == "pair" and gen.summary["metrics"]["Avg"] == 100.0
    assert all(len(r.image_fps) == 2 for r in gen.records)


def test_registry_and_judgment_counts_pure() -> None:
    assert isinstance(get_benchmark("if-bench"), IFBench)
    recs = [Record("q1", "i", "i", {}, "m", "", "Answer: C", "C", prompt=""),
            Record("q2", "i", "i", {}, "m", "", "**B**", "B", parsed="B", parse_method="llm", prompt="")]
    j = judgment_counts(recs, {})
    assert j["modes_differ"] == 1 and j["modes_differ_correctness"] == 1 and j["official_needs_extractor"] == 1
    assert j["robust_needs_extractor"] == 0 and j["extractor_used"] == 1
