"""evalkit: a lightweight async evaluator for hosted vision-language models.

    import evalkit
    result = evalkit.run("mcq", "vllm/my-model", data="set.tsv", base_url="http://localhost:8000/v1")
    board = evalkit.compare([result.out_dir, "runs/mcq-other-model-..."], out="runs/compare")
    shards = [evalkit.run("mcq", "vllm/my-model", shard=f"{k}/4", out=f"runs/x-{k}") for k in range(1, 5)]
    merged = evalkit.merge([s.out_dir for s in shards], "runs/x")
    matrix = evalkit.run_matrix(["mcq", "pope"], ["openai/gpt-4o", "vllm/my-model"], out="runs/m")  # docs/matrix.md
"""

from __future__ import annotations

from typing import Any

from evalkit.core.version import __version__

__all__ = ["run", "run_async", "RunResult", "compare", "Comparison", "merge", "build_view", "run_matrix",
           "run_matrix_async", "MatrixResult", "__version__"]


def __getattr__(name: str) -> Any:
    """The API is imported lazily so `import evalkit` (and the CLI's start-up) stays light."""
    if name in ("run", "run_async", "RunResult"):
        from evalkit.engine import evaluate

        return getattr(evaluate, name)
    if name in ("compare", "Comparison"):
        from evalkit.multi import compare as comparison

        return getattr(comparison, name)
    if name in ("run_matrix", "run_matrix_async", "MatrixResult"):
        from evalkit.multi import matrix

        return getattr(matrix, name)
    if name == "merge":
        from evalkit.multi.merge import merge

        return merge
    if name == "build_view":
        from evalkit.view import build_view

        return build_view
    raise AttributeError(name)
