"""Answer keys built from a benchmark's own queries (every variant), for the simulated model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evalkit.core.types import Query
from evalkit.images.pipeline import ImagePipeline
from evalkit.sim.answerkey import AnswerKey, build_answer_key


def answer_key_from_queries(queries: Iterable[Query], pipeline: ImagePipeline | None = None) -> AnswerKey:
    if pipeline is not None:
        return build_answer_key(queries, pipeline.fingerprint)
    own = ImagePipeline()
    try:
        return build_answer_key(queries, own.fingerprint)
    finally:
        own.close()


def answer_key_for(bench: str, options: dict[str, Any]) -> AnswerKey:
    """Load and expand `bench` exactly as `evalkit run` would, and key every query."""
    from evalkit.engine.evaluate import DEFAULTS, prepare

    _, _, queries, _ = prepare(bench, {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}})
    return answer_key_from_queries(queries)
