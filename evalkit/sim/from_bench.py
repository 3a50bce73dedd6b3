"""Answer keys built from a benchmark's own queries (every variant), for the simulated model."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from evalkit.benchmarks.prepare import prepare
from evalkit.benchmarks.run_settings import resolve_settings
from evalkit.core.types import Query
from evalkit.images.pipeline import ImagePipeline
from evalkit.sim.answerkey import AnswerEntry, AnswerKey, build_answer_key, normalise_text
from evalkit.sim.answers_file import is_records, match_answers, read_answers


def answer_key_from_queries(queries: Iterable[Query], pipeline: ImagePipeline | None = None) -> AnswerKey:
    if pipeline is not None:
        return build_answer_key(queries, pipeline.fingerprint)
    own = ImagePipeline()
    try:
        return build_answer_key(queries, own.fingerprint)
    finally:
        own.close()


def queries_for(bench: str, options: dict[str, Any]) -> list[Query]:
    """`bench` loaded and expanded exactly as `evalkit run` would (options as given to it)."""
    settings = resolve_settings(bench, "", {k: v for k, v in options.items() if v is not None})
    return list(prepare(bench, settings.bench_dict()).queries)


def answer_key_for(bench: str, options: dict[str, Any]) -> AnswerKey:
    """Load and expand `bench` exactly as `evalkit run` would (options as given to it), and key every query."""
    return answer_key_from_queries(queries_for(bench, options))


def sim_answer_key(bench: str, options: dict[str, Any], given: AnswerKey | None, replay: str | None,
                   say: Callable[[str], None] | None = None) -> AnswerKey:
    """`evalkit sim --bench`'s key: with an answers file in `replay`, its answers alone (then `given`, the
    --answer-key); else `given` (a run's records, --answer-key) first, then every query of the benchmark."""
    if replay and not is_records(replay):
        answers = answers_key_for(bench, options, replay, say)
        return answers.merged(given) if given is not None else answers
    every = answer_key_for(bench, options)
    return given.merged(every) if given is not None else every


def answers_key_for(bench: str, options: dict[str, Any], path: str, say: Callable[[str], None] | None = None
                    ) -> AnswerKey:
    """A replay key from another harness's answers file (evalkit.sim.answers_file) over `bench`'s queries;
    `say` gets one line of what matched. Questions without an answer are left out of the key."""
    queries = queries_for(bench, options)
    matched = match_answers(queries, read_answers(path), bench)
    if say is not None:
        say(matched.note(bench, len(queries)))
    return replay_key(queries, matched.replies)


def replay_key(queries: Sequence[Query], replies: Mapping[str, str], pipeline: ImagePipeline | None = None) -> AnswerKey:
    """An AnswerKey whose entries carry a recorded reply per query id (replay of a real model's answers).

    Entries are keyed like the simulator looks them up (request text + image fingerprints);
    identical requests (the release's duplicated questions) keep the first reply, as a real
    server would be asked once and the cache answer the copy. Keys for several models' replies
    to the same queries share one `pipeline`: each image is then decoded once, not once per key.
    """
    if pipeline is None:
        own = ImagePipeline()
        try:
            return replay_key(queries, replies, own)
        finally:
            own.close()
    key = AnswerKey()
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for q in queries:
        text, fps = q.prompt_text(), [pipeline.fingerprint(p) for p in q.image_parts()]
        ident = (normalise_text(text), tuple(fps))
        if ident in seen or q.id not in replies:
            continue
        seen.add(ident)
        key.add(AnswerEntry(base_id=q.base_id, text=text, images=fps, answer=q.gold, reply=replies[q.id]))
    return key
