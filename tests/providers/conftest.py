"""Fixtures the provider tests share."""

from __future__ import annotations

from typing import Any

import pytest

from evalkit.sim.machinery import serving as sim_serving


@pytest.fixture
def bodies(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The JSON bodies as the simulated server decoded them, in order (what went over the wire)."""
    seen: list[dict[str, Any]] = []
    reply = sim_serving.model_reply

    def capture(state, dialect, req, body, *args, **kw):
        seen.append(body)
        return reply(state, dialect, req, body, *args, **kw)

    monkeypatch.setattr(sim_serving, "model_reply", capture)
    return seen
