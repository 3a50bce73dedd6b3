"""The installed package holds no test-only code (issue 35 item 14): the simulator's hostile replies live in
tests/hostile_routes.py and reach a server through its extension point (`routes=`, evalkit.sim.extension),
and the RGB-Th-Bench replay helpers the tests use live in tests/rgbth_common.py. And the simulator reads in
pieces (item 15): the batch routes were one function of 246 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aiohttp
from aiohttp import web

import evalkit
from evalkit.sim.extension import SimRoutes
from evalkit.sim.server import SimConfig, start_sim

PACKAGE = Path(evalkit.__file__).parent
TEST_ONLY = ("/hostile/", "hostile_log", "def recorded_replies", "def replay_replies", "def git_blob_id")
KEY = "sk-hygiene"
CHAT = {"model": "sim-model", "messages": [{"role": "user", "content": "Hi?"}]}


def test_the_package_holds_no_test_only_code():
    found = [f"{p.relative_to(PACKAGE)}: {name}" for p in sorted(PACKAGE.rglob("*.py"))
             for name in TEST_ONLY if name in p.read_text(encoding="utf-8")]
    assert found == []


class Tagged:
    """A `routes` extension: a twin of every model route under /tag/{label} that marks the reply, a route of
    its own, and a count of resets."""

    def __init__(self) -> None:
        self.resets = 0
        self.seen: list[str] = []

    def __call__(self, routes: SimRoutes) -> None:
        def wrap(dialect, normal):
            async def handle(request: web.Request) -> web.StreamResponse:
                self.seen.append(f"{dialect.name} {request.match_info['label']}")
                response = await normal(request)
                response.headers["X-Tag"] = request.match_info["label"]
                return response
            return handle

        async def show(request: web.Request) -> web.Response:
            return web.json_response(self.seen)

        routes.add_twins("/tag/{label}", wrap)
        routes.app.router.add_get("/sim/tagged", show)
        routes.on_reset(self.reset)

    def reset(self) -> None:
        self.resets += 1


async def test_routes_added_through_the_extension_point_are_checked_as_the_routes_they_wrap():
    tagged = Tagged()
    async with await start_sim(SimConfig(api_key=KEY), routes=tagged) as sim, aiohttp.ClientSession() as session:
        async with session.post(f"{sim.url}/tag/t1/v1/chat/completions", json=CHAT,
                                headers={"Authorization": f"Bearer {KEY}"}) as resp:
            assert resp.status == 200 and resp.headers["X-Tag"] == "t1"
            assert (await resp.json())["choices"][0]["message"]["content"]
        async with session.post(f"{sim.url}/tag/t2/v1/chat/completions", json=CHAT) as resp:
            assert resp.status == 401  # no key: refused before the twin is reached
        azure = f"{sim.url}/tag/t3/openai/deployments/sim-model/chat/completions"
        async with session.post(azure, json=CHAT, headers={"api-key": KEY}) as resp:
            assert resp.status == 404  # Azure's check: a classic route needs ?api-version=
        async with session.post(azure + "?api-version=2024-10-21", json=CHAT, headers={"api-key": KEY}) as resp:
            assert resp.status == 200 and resp.headers["X-Tag"] == "t3"
        async with session.post(azure + "?api-version=2024-10-21", json=CHAT,
                                headers={"Authorization": f"Bearer {KEY}"}) as resp:
            assert resp.status == 401  # Azure takes its key as api-key, never as a bearer token
        async with session.get(f"{sim.url}/sim/tagged") as resp:
            assert await resp.json() == ["openai t1", "azure t3"]
        assert sim.counters.snapshot()["completions"] == 2
        async with session.post(f"{sim.url}/sim/reset"):
            pass
        assert tagged.resets == 1 and sim.counters.snapshot()["completions"] == 0


async def test_a_server_without_extensions_serves_no_hostile_route():
    async with await start_sim(SimConfig()) as sim, aiohttp.ClientSession() as session:
        async with session.post(f"{sim.url}/hostile/content-number/v1/chat/completions", json=CHAT) as resp:
            assert resp.status == 404
        async with session.get(f"{sim.url}/sim/sink") as resp:
            assert resp.status == 404


def test_no_simulator_function_runs_past_100_lines():
    long = []
    for p in sorted((PACKAGE / "sim").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 100:
                long.append(f"{p.name}:{node.name} {node.end_lineno - node.lineno + 1} lines")
    assert long == []
