"""docs/python.md's notebook walkthrough runs as written, inside a running event loop.

Its ```python blocks are the cells: they are executed in order, in one namespace, inside
`asyncio.run(...)` (top-level `await` allowed, as a notebook allows it), against two simulated
servers whose URLs replace the document's, as `evalkit sim` would serve them there. A cell marked
`# needs pandas` runs when pandas is installed (it is not one of evalkit's dependencies).
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import re
import threading

from synthetic_data import REPO

from evalkit.sim.args import PLAUSIBLE
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

DOC = REPO / "docs" / "python.md"
SMALL, LARGE = "http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"


def cells(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)


async def run_notebook(sources: list[str], namespace: dict) -> None:
    """Each cell compiled as IPython compiles it (top-level await allowed) and run on this loop."""
    for source in sources:
        code = compile(source, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # noqa: S307 - the documentation's own cells
        if inspect.iscoroutine(result):
            await result


def test_the_walkthrough_runs_in_a_running_loop(tmp_path, monkeypatch):
    text = DOC.read_text(encoding="utf-8")
    assert SMALL in text and LARGE in text
    sources = cells(text)
    assert len(sources) >= 8
    if importlib.util.find_spec("pandas") is None:
        sources = [s for s in sources if not s.startswith("# needs pandas")]
    monkeypatch.chdir(tmp_path)  # runs/ and cache/ as the cells name them
    monkeypatch.setattr("evalkit.engine.closing.draw_plots", lambda *a, **k: None)  # a run's plots: tested elsewhere
    monkeypatch.delenv("EVALKIT_CACHE_DIR", raising=False)
    key = answer_key_for("mcq", {"data": "sample"})
    small = SimThread(SimConfig(answer_key=key, params=PLAUSIBLE, served_model_name="small-vlm"))
    large = SimThread(SimConfig(answer_key=key, params=SimParams(), served_model_name="big-vlm"))
    with small, large:
        sources = [s.replace(SMALL, small.url + "/v1").replace(LARGE, large.url + "/v1") for s in sources]
        namespace: dict = {}
        before = set(threading.enumerate())
        asyncio.run(run_notebook(sources, namespace))
        asked = small.counters.snapshot()["requests"], large.counters.snapshot()["requests"]
    n = namespace["small"].summary["n_queries"]
    assert asked == (n, n)  # each model asked once per query: the matrix and the re-runs resumed
    assert {t for t in set(threading.enumerate()) - before if not t.name.startswith("evalkit-sim")} == set()
    assert namespace["small"].exit_code == namespace["large"].exit_code == 0
    assert namespace["board"].ranking == ["vllm/big-vlm", "vllm/small-vlm"]  # the exact model first
    assert len(namespace["rows"]) == n and namespace["wrong"]  # the plausible model gets some wrong
    assert namespace["matrix"].exit_code == 0 and namespace["matrix"].comparisons["mcq"].ranking == namespace["board"].ranking
    assert namespace["again"].summary["this_run"] == {"sent": 0, "from_cache": 0, "already": n,
                                                           "cost_usd": 0.0}
    assert namespace["quiet"].out_dir == namespace["large"].out_dir
