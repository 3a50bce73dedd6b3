"""`evalkit view` without a browser: the site's files, chunks, deep-link ids, thumbnails, placeholders.

Two simulated models answer a small MCQ set with image files under CircularEval (4 variants per
question), so every part of the site has something to show. tests/view/test_view_browser.py renders it.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import pytest
from synthetic_data import FIXTURES, make_mcq_jsonl

import evalkit
from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.prepare import prepare
from evalkit.cli import main
from evalkit.engine.evaluate import run
from evalkit.rundir.layout import RunDir
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread
from evalkit.view import site as site_module
from evalkit.view.serve import make_server
from evalkit.view.site import build_site

FIXTURES = FIXTURES / "v010"
N_ITEMS = 12
MODELS = ("vllm/model-a", "vllm/model-b")


def two_runs(folder: Path, n: int = N_ITEMS) -> tuple[Path, list[Path]]:
    """The data file and two runs of it (different simulated models, mixed answer styles)."""
    data = make_mcq_jsonl(folder / "data", n, seed=3, image_size=160)
    key = answer_key_for("mcq", {"data": str(data), "circular": True})
    dirs = []
    for i, model in enumerate(MODELS):
        params = SimParams(theta=0.6, r=0.9, g=0.3, seed=i + 1, style="mixed")
        with SimThread(SimConfig(answer_key=key, params=params)) as sim:
            res = run("mcq", model, data=str(data), circular=True, base_url=sim.url, out=str(folder / f"run-{i}"),
                      cache_dir=str(folder / "cache"), progress=False, plots=i == 0)
        dirs.append(res.out_dir)
    return data, dirs


def script_data(path: Path) -> tuple[str, list, object]:
    """(function, leading arguments, data) of one data/*.js file: `EVK.fn(args..., data);`."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("EVK.") and text.endswith(");\n")
    fn, _, body = text[4:-3].partition("(")
    args = json.loads("[" + body + "]")
    return fn, args[:-1], args[-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, list[Path]]:
    return two_runs(tmp_path_factory.mktemp("view-runs"))


@pytest.fixture(scope="module")
def built(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("view-site") / "site"
    return build_site(runs[1], out), out


def test_site_files_and_chunks(runs, tmp_path, monkeypatch):
    monkeypatch.setattr(site_module, "ROWS_PER_CHUNK", 5)
    monkeypatch.setattr(site_module, "ITEMS_PER_CHUNK", 4)
    site = build_site(runs[1], tmp_path / "site")
    out = site.out
    assert (out / "index.html").is_file() and (out / "assets" / "core.js").is_file()
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html and "{{STAMP}}" not in html  # nothing from a network
    assert "data/meta.js" in html and "data/ids.js" in html
    rows = sorted((out / "data").glob("rows-*.js"))
    items = sorted((out / "data").glob("items-*.js"))
    assert [p.name for p in rows] == ["rows-000.js", "rows-001.js", "rows-002.js"]  # 12 questions, 5 a chunk
    assert len(items) == 3
    _, _, ids = script_data(out / "data" / "ids.js")
    all_rows = []
    for k, p in enumerate(rows):
        fn, args, data = script_data(p)
        assert (fn, args) == ("rows", [k]) and len(data) == (5 if k < 2 else 2)
        all_rows += data
    for k, p in enumerate(items):
        fn, args, data = script_data(p)
        assert (fn, args) == ("items", [k])
        assert [d["id"] for d in data] == ids[k * 4:(k + 1) * 4]  # a question's detail is found from its position
    _, _, meta = script_data(out / "data" / "meta.js")
    assert meta["n"] == N_ITEMS == len(all_rows) == len(ids)
    assert (meta["rc"], meta["nr"], meta["dc"]) == (5, 3, 4)
    assert meta["models"] == list(MODELS) and meta["facet"] == "category"
    # a smaller build does not leave the larger build's chunks behind
    monkeypatch.setattr(site_module, "ROWS_PER_CHUNK", 2000)
    monkeypatch.setattr(site_module, "ITEMS_PER_CHUNK", 200)
    build_site(runs[1], out)
    assert sorted(p.name for p in (out / "data").glob("*.js")) == ["ids.js", "items-000.js", "meta.js", "rows-000.js"]


def test_deep_link_ids_are_the_data_ids_and_stable(runs, built):
    data, _ = runs
    site, out = built
    _, _, ids = script_data(out / "data" / "ids.js")
    expected = [json.loads(line)["id"] for line in data.read_text(encoding="utf-8").splitlines()]
    assert ids == expected  # `index.html#item=q00003` names the data's own question id
    again = build_site(runs[1], out.parent / "again")
    assert script_data(again.out / "data" / "ids.js")[2] == ids


def test_detail_holds_every_variant_both_answers_and_both_modes(runs, built):
    data, dirs = runs
    _, out = built
    _, _, items = script_data(out / "data" / "items-000.js")
    records = [RunDir(d).load_records() for d in dirs]
    bench, item_list, queries, *_ = prepare("mcq", {"data": str(data), "circular": True})
    by_id = {q.id: q for q in queries}
    first = items[0]
    item = item_list[0]
    assert first["id"] == item.id and first["q"] == item.question and first["o"] == item.options
    assert first["g"] == item.answer
    assert [v["id"] for v in first["v"]] == [q.id for q in queries if q.base_id == item.id]
    assert len(first["v"]) == 4 and first["v"][1]["l"] == "shift 1"
    for v in first["v"]:
        assert v["g"] == by_id[v["id"]].gold
        for k, a in enumerate(v["a"]):
            rec = records[k][v["id"]]
            assert (a["r"], a["p"], a["m"], a["ok"]) == (rec.response, rec.parsed, rec.parse_method, rec.correct)
            other = bench.parse(by_id[v["id"]], rec.response, "robust")
            assert a["o"] == {"mode": "robust", "p": other.answer, "m": other.method,
                              "ok": bench.score(by_id[v["id"]], other)}
            assert a["in"] == rec.usage["input_tokens"] and a["lat"] == rec.latency_s
    image = first["v"][0]["im"][0]
    assert image["t"].startswith("thumbs/") and (out / image["t"]).is_file()
    assert (out / image["f"]).resolve() == (data.parent / "images" / "img00000.png").resolve()  # linked, not copied
    assert max(image["w"], image["h"]) <= 384


def test_rows_flags_match_the_records(runs, built):
    _, dirs = runs
    _, out = built
    _, _, rows = script_data(out / "data" / "rows-000.js")
    _, _, ids = script_data(out / "data" / "ids.js")
    records = [RunDir(d).load_records() for d in dirs]
    for qid, row in zip(ids, rows, strict=True):
        for k in range(2):
            mine = [r for r in records[k].values() if r.base_id == qid]
            mask, right, n, _ = row[3 + k]
            assert n == len(mine) == 4 and right == sum(r.correct is True for r in mine)
            assert bool(mask & 1) == any(r.correct for r in mine)
        answers = {(r.query_id, r.parsed) for recs in records for r in recs.values() if r.base_id == qid}
        disagree = len(answers) > len({a[0] for a in answers})
        assert bool(row[2] & 1) == disagree


def test_thumbnails_made_once_and_reused(runs, tmp_path):
    data, dirs = runs
    images = sorted((data.parent / "images").glob("*.png"))
    first = build_site(dirs, tmp_path / "site")
    assert (first.thumbs.made, first.thumbs.reused, first.thumbs.hashed) == (len(images), 0, len(images))
    made = sorted((tmp_path / "site" / "thumbs").glob("*/*.jpg"))
    assert len(made) == len(images)  # one per image: 4 variants x 2 models share it
    stamps = {p: p.stat().st_mtime_ns for p in made}
    second = build_site(dirs, tmp_path / "site")
    assert (second.thumbs.made, second.thumbs.reused, second.thumbs.hashed) == (0, len(images), 0)
    answers = 2 * 4 * N_ITEMS
    assert sum(first.parses) == answers and second.parses == (0, answers)  # the other parse mode, remembered
    assert {p: p.stat().st_mtime_ns for p in made} == stamps
    index = json.loads((tmp_path / "site" / "thumbs" / "index.json").read_text())
    assert len(index["thumbs"]) == len(images) and len(index["files"]) == len(images)


def test_unreadable_image_gets_a_placeholder(runs, tmp_path):
    data, dirs = runs
    copy = tmp_path / "data"
    shutil.copytree(data.parent, copy)
    (copy / "images" / "img00002.png").write_bytes(b"not an image at all")
    moved = []
    for d in dirs:
        shutil.copytree(d, tmp_path / d.name)
        cfg = json.loads((tmp_path / d.name / "config.json").read_text())
        cfg["config"]["data"] = str(copy / "data.jsonl")
        (tmp_path / d.name / "config.json").write_text(json.dumps(cfg))
        moved.append(tmp_path / d.name)
    site = build_site(moved, tmp_path / "site")
    assert site.thumbs.failed == 1 and site.thumbs.made == N_ITEMS - 1
    _, _, items = script_data(tmp_path / "site" / "data" / "items-000.js")
    broken = next(d for d in items if d["id"] == "q00002")
    image = broken["v"][0]["im"][0]
    assert image["t"] is None and "img00002.png" in image["x"] and image["f"].endswith("img00002.png")
    assert all(d["v"][0]["im"][0]["t"] for d in items if d["id"] != "q00002")


def test_data_gone_shows_the_records_with_placeholders(runs, tmp_path):
    _, dirs = runs
    moved = tmp_path / "run"
    shutil.copytree(dirs[0], moved)
    cfg = json.loads((moved / "config.json").read_text())
    cfg["config"]["data"] = str(tmp_path / "gone" / "data.jsonl")
    (moved / "config.json").write_text(json.dumps(cfg))
    site = build_site([moved], tmp_path / "site")
    assert any("from the records alone" in n and "data not found" in n for n in site.notes)
    _, _, items = script_data(tmp_path / "site" / "data" / "items-000.js")
    rec = RunDir(moved).load_records()[items[0]["v"][0]["id"]]
    assert items[0]["fr"] is True and items[0]["q"] == rec.prompt and items[0]["g"] == rec.gold
    image = items[0]["v"][0]["im"][0]
    assert image["t"] is None and image["x"].startswith("image unavailable: data not found")
    assert items[0]["v"][0]["a"][0]["r"] == rec.response and "o" not in items[0]["v"][0]["a"][0]


def test_a_judge_reply_kept_in_the_records_is_shown(runs, tmp_path):
    _, dirs = runs
    moved = tmp_path / "run"
    shutil.copytree(dirs[0], moved)
    lines = (moved / "records.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["judge_reply"] = "The answer given is option C."
    (moved / "records.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    build_site([moved], tmp_path / "site")
    _, _, items = script_data(tmp_path / "site" / "data" / "items-000.js")
    answers = {v["id"]: v["a"][0] for d in items for v in d["v"]}
    assert answers[first["query_id"]]["x"] == {"judge_reply": "The answer given is option C."}
    assert sum("x" in a for a in answers.values()) == 1


def test_overview_names_every_model_with_intervals_counts_and_plots(runs, built):
    _, dirs = runs
    _, out = built
    _, _, meta = script_data(out / "data" / "meta.js")
    ov = meta["overview"]
    board = ov["leaderboard"]
    summaries = [json.loads((d / "summary.json").read_text()) for d in dirs]
    assert {b["label"] for b in board} == set(MODELS)
    for b in board:
        h = summaries[MODELS.index(b["label"])]["headline"]
        assert (b["metric"], b["value"], [b["lo"], b["hi"]]) == (h["metric"], h["value"], h["ci95"])
    assert board[0]["value"] >= board[1]["value"]
    keys = list(summaries[0]["counts"])
    assert ov["counts"]["keys"][:len(keys)] == keys  # every key of the counts, cutoffs too
    assert ov["counts"]["values"][0] == [summaries[0]["counts"][k] for k in ov["counts"]["keys"]]
    assert ov["plots"][0] and not ov["plots"][1]  # only the first run drew plots
    for p in ov["plots"][0]:
        assert (out / p["src"]).is_file()
    head_table = next(t for t in ov["tables"] if [r[0] for r in t["rows"]][:2] == list(MODELS))
    assert head_table["head"][0] == "model"
    facts = dict(ov["runs"][0]["manifest"])
    assert facts["evalkit"] and "served_by" in facts


@pytest.mark.parametrize("case", sorted(p.name for p in FIXTURES.iterdir() if (p / "runs").is_dir()))
def test_v010_run_directories_open(case, tmp_path):
    run_dir = next((FIXTURES / case / "runs").iterdir())
    site = build_site([run_dir], tmp_path / "site")
    records = RunDir(run_dir).load_records()
    assert site.questions == len({r.base_id for r in records.values()})
    _, _, meta = script_data(tmp_path / "site" / "data" / "meta.js")
    assert meta["overview"]["runs"][0]["has_manifest"] is False
    assert meta["overview"]["leaderboard"][0]["value"] is not None
    _, _, items = script_data(tmp_path / "site" / "data" / "items-000.js")
    shown = {v["id"] for d in items for v in d["v"]}
    assert shown <= set(records) and items[0]["v"][0]["a"][0]["r"] == records[items[0]["v"][0]["id"]].response


def test_command_writes_the_site_and_refuses_bad_input(runs, tmp_path, capsys):
    _, dirs = runs
    assert main(["view", str(dirs[0]), "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "index.html").is_file()
    assert "1 model;" in capsys.readouterr().out
    assert main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalkit: error:") and "not an evalkit run directory" in err and "\n" not in err
    other = next((FIXTURES / "tdbench" / "runs").iterdir())
    assert main(["view", str(dirs[0]), str(other), "--out", str(tmp_path / "mixed")]) == 2
    err = capsys.readouterr().err.strip()
    assert "different benchmarks" in err and "\n" not in err
    assert not (tmp_path / "mixed").exists()


def test_default_out_and_python_api(runs, tmp_path, monkeypatch):
    _, dirs = runs
    one = tmp_path / "copy"
    shutil.copytree(dirs[0], one)
    assert evalkit.build_view([one]) == one / "view" / "index.html"
    monkeypatch.chdir(tmp_path)
    assert evalkit.build_view(dirs) == Path("runs") / "view-mcq" / "index.html"
    assert (tmp_path / "runs" / "view-mcq" / "index.html").is_file()


def test_serve_answers_on_localhost(built):
    import threading

    _, out = built
    server = make_server(out, 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        assert server.server_address[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with urllib.request.urlopen(url + "/index.html", timeout=60) as resp:  # a bound on a hang only
            assert resp.status == 200 and b"data/meta.js" in resp.read()
        with urllib.request.urlopen(url + "/data/ids.js", timeout=60) as resp:
            assert resp.read().startswith(b"EVK.ids(")
    finally:
        server.shutdown()
        server.server_close()


def test_benchmark_facet_names():
    assert site_module.FACET.get("if-bench") == "dimension" and site_module.FACET.get("rgb-th-bench") == "skill"
    assert get_benchmark("if-bench").name == "if-bench"


def test_thumbnail_follows_the_transform_as_sent(tmp_path):
    from PIL import Image

    from evalkit.core.types import ImageRef, Transform
    from evalkit.images.pipeline import ImagePipeline
    from evalkit.view.thumbs import ThumbStore

    src = tmp_path / "wide.jpg"
    Image.new("RGB", (3000, 1000), (200, 30, 30)).save(src)
    ref = ImageRef.from_path(str(src))
    pipeline = ImagePipeline()
    try:
        store = ThumbStore(tmp_path / "site", pipeline)
        plain = store.want(ref, Transform(), "vllm")
        turned = store.want(ref, Transform(rotate=90), "vllm")
        cropped = store.want(ref, Transform(crop=(0, 0, 500, 1000)), "anthropic")
        assert store.want(ref, Transform(), "vllm") == plain and len({plain, turned, cropped}) == 3
        store.make()
        sizes = {h: (store.get(h, ref).width, store.get(h, ref).height) for h in (plain, turned, cropped)}
    finally:
        pipeline.close()
    assert sizes == {plain: (384, 128), turned: (128, 384), cropped: (192, 384)}
    assert store.stats.made == 3 and store.get(plain, ref).full == "../wide.jpg"


def test_out_must_be_new_empty_or_a_site(runs, tmp_path):
    from evalkit.core.errors import EvalkitError

    _, dirs = runs
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(EvalkitError, match="holds other files"):
        build_site(dirs, tmp_path / "mine")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    with pytest.raises(EvalkitError, match="is a run directory"):
        build_site(dirs, dirs[0])
