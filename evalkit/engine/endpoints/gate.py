"""The run's preflight, held until the first query that must really be sent (see providers/preflight.py).

A fully cached re-run never calls it, so it works offline; a run that needs the network probes the
model's endpoint and the judge's at once, before its first request, and stops with exit 2 and the
cause when either cannot answer. It also remembers whether the endpoint is the simulated server,
so that the end of the run can warn when the simulator was asked questions its key does not hold.
A model the server does not list (a lenient compatible server's alias) is one line, and the
model's (or the judge's) Confirmation then holds its runner to one request until the server has
answered it (evalkit.ask.confirm). Given `start` (a model x benchmark matrix's start line), the first
request also waits for it once the probes passed: no pair sends until every pair can start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from evalkit.ask.confirm import Confirmation
from evalkit.providers import ProviderSpec, api_key_for
from evalkit.providers.preflight import Reachable, probe_all, sim_unkeyed


class Preflight:
    def __init__(self, spec: ProviderSpec, judge: ProviderSpec | None, env: Mapping[str, str],
                 say: Callable[[str], None], start: Callable[[], Awaitable[None]] | None = None):
        self._spec, self._judge, self._env, self._say = spec, judge, env, say
        self._start = start
        self._tasks: dict[str, asyncio.Task[Reachable]] = {}
        self._unkeyed_before: dict[str, int] = {}
        self.confirms = {"--model": Confirmation(spec.model, "--model", spec.label)}  # for the runners
        if judge is not None:
            self.confirms["--judge"] = Confirmation(judge.model, "--judge", judge.label)

    def _probe(self, spec: ProviderSpec, flag: str) -> asyncio.Task[Reachable]:
        task = self._tasks.get(flag)
        if task is None:
            task = self._tasks[flag] = asyncio.ensure_future(self._reach(spec, flag))
        return task

    async def _reach(self, spec: ProviderSpec, flag: str) -> Reachable:
        reached = await probe_all(spec, api_key_for(spec, self._env, flag=flag), flag, env=self._env)
        for note in reached.notes():
            self._say(note)
        listed = reached.unlisted()
        if listed is not None:
            whose = "" if flag == "--model" else "the judge's "
            if listed:  # an empty list: no metadata call (bedrock/), the first request confirms quietly
                self._say(f"{whose}model '{spec.model}' is not listed by the server (it lists: "
                          f"{', '.join(listed[:5])}{', …' if len(listed) > 5 else ''}); asking anyway")
            self.confirms[flag].require(listed)
        for url in reached.simulator_urls:
            self._unkeyed_before[url] = await sim_unkeyed(url) or 0
        return reached

    async def model(self) -> None:
        """Before the model's first request: its endpoint and the judge's answer (EvalkitError if not)."""
        waits = [self._probe(self._spec, "--model")]
        if self._judge is not None:
            waits.append(self._probe(self._judge, "--judge"))
        if all(task.done() for task in waits):  # every query after the first: no future, no turn of the loop
            for task in waits:
                task.result()  # the probe's error, if it failed
        else:
            await asyncio.shield(asyncio.gather(*waits))
        if self._start is not None:
            await self._start()

    async def judge(self) -> None:
        """Before the judge's first request (a run whose answers were all cached probes it only now)."""
        if self._judge is not None:
            await asyncio.shield(self._probe(self._judge, "--judge"))
            if self._start is not None:
                await self._start()

    async def simulator_mismatch(self) -> str | None:
        """A warning when the simulated server answered questions its answer key does not hold."""
        for url, before in self._unkeyed_before.items():
            now = await sim_unkeyed(url)
            if now is not None and now > before:
                return (f"the simulated server at {url} was asked {now - before} questions its answer key does "
                        "not hold and answered them at chance: was it started with other benchmark flags "
                        "(--circular, --rotations, --lang, --data) than this run?")
        return None

    def servers(self) -> dict[str, dict]:
        """What the probed endpoints said about themselves (served models, vLLM version), by URL."""
        out: dict[str, dict] = {}
        for task in self._tasks.values():
            if task.done() and not task.cancelled() and task.exception() is None:
                for p in task.result().probes:
                    if p.ok and (p.models or p.version):
                        out[p.url] = {"served_models": list(p.models), "version": p.version}
        return out

    def cancel(self) -> None:
        for task in self._tasks.values():
            task.cancel()
