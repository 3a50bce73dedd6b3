"""A model x benchmark matrix in one call: every (benchmark, model) pair an ordinary run, all at once.

    result = evalkit.run_matrix(["mcq", "pope"], ["openai/gpt-4o", "vllm/qwen"], out="runs/m")
    result.pairs[0].result.summary, result.comparisons["mcq"].results, result.exit_code

Each pair runs `run_async` in one event loop, in its own default run directory under `out` (runs/
without it), so the same call again resumes every pair. Pairs on one endpoint share its limiter
(--concurrency, --rpm, --tpm hold per endpoint); each endpoint has its own, so a slow one holds no
other back. No pair sends anything before every pair has passed its checks (settings, keys, SDKs,
URLs, then the endpoints' preflight): one that cannot start stops them all, nothing sent (exit 2).
Then, per benchmark, `evalkit compare`'s outputs in OUT/compare-<bench>/ (two or more models) and,
given `views` (the CLI's `evalkit view`), a site in OUT/view-<bench>/.
Exit code: 130 interrupted (every pair resumable), else 2 when a pair stopped for a cause the user must
fix, else 1 when one is incomplete, else 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.benchmarks.run_settings import resolve_settings
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import HOOKS, MATRIX_HOOKS
from evalkit.engine.budgeting import check_budget_flags
from evalkit.engine.dry_run import matrix_dry_run
from evalkit.engine.endpoints.specs import specs_for
from evalkit.engine.endpoints.wiring import EndpointLimiters
from evalkit.engine.evaluate import RunResult, run_async
from evalkit.engine.stopping.in_thread import run_blocking
from evalkit.multi.compare import Comparison, compare
from evalkit.multi.deciding import Decider, deciders_for
from evalkit.multi.matrix_display import MatrixDisplay, pair_console
from evalkit.multi.pairs import Pair, plan_pairs
from evalkit.multi.suite import BenchEntry, ModelEntry

RUN_FILES = ("config.json", "records.jsonl")  # an --out holding one of these is a run directory


@dataclass
class PairResult:
    """One pair's run: its RunResult, or the error that stopped it (one line) and its exit code."""

    bench: str
    model: str  # PROVIDER/MODEL
    shown: str  # its label, else its spec
    result: RunResult | None = None
    error: str | None = None
    exit_code: int = 0
    interrupted: bool = False

    @property
    def label(self) -> str:
        return f"{self.bench} · {self.shown}"

    @property
    def out_dir(self) -> Path | None:
        return self.result.out_dir if self.result is not None else None


@dataclass
class MatrixResult:
    pairs: list[PairResult]
    out: Path  # the folder holding the pairs' run directories, compare-<bench>/ and view-<bench>/
    comparisons: dict[str, Comparison] = field(default_factory=dict)
    sites: dict[str, Path] = field(default_factory=dict)  # bench -> the view's index.html
    messages: list[str] = field(default_factory=list)
    exit_code: int = 0
    dry_run: dict[str, Any] | None = None  # with dry_run=True: per pair and the total
    deciders: dict[str, Decider] = field(default_factory=dict)  # --until-decided: bench -> its controller


class StartLine:
    """No pair sends before every pair is ready to, has finished without sending, or has failed; a pair
    that fails first (cannot start) stops every pair waiting here: nothing is sent."""

    def __init__(self, n: int) -> None:
        self._left = n
        self._open = asyncio.Event()
        self.failed: str | None = None  # why the matrix cannot start

    def _settle(self) -> None:
        self._left -= 1
        if self._left <= 0:
            self._open.set()

    def fail(self, why: str) -> None:
        if not self._open.is_set():  # after the start, a pair's failure is its own
            self.failed = why
            self._open.set()

    @property
    def opened(self) -> bool:
        return self._open.is_set() and self.failed is None

    async def wait(self) -> None:
        await self._open.wait()
        if self.failed is not None:
            raise EvalkitError(f"not started: another pair cannot start ({self.failed})")


class _PairGate:
    """A pair's place at the start line: it arrives there with its first request (the run's start_gate
    hook), or when its run ends (finished, or failed) without having asked anything."""

    def __init__(self, line: StartLine) -> None:
        self.line = line
        self.arrived = False

    async def __call__(self) -> None:
        if not self.arrived:
            self.arrived = True
            self.line._settle()
        await self.line.wait()

    def finish(self, error: str | None = None) -> None:
        if not self.arrived:
            self.arrived = True
            if error is None:
                self.line._settle()
            else:
                self.line.fail(error)


def run_matrix(benches: Sequence[Any] = (), models: Sequence[Any] = (), **options: Any) -> MatrixResult:
    """`run_matrix_async` from synchronous code; inside a running event loop (a notebook cell) on a worker
    thread with its own loop, interrupted as Ctrl-C interrupts it (engine/stopping/in_thread.py)."""
    return run_blocking(lambda: run_matrix_async(benches, models, **options))


async def run_matrix_async(benches: Sequence[str | BenchEntry | Mapping[str, Any]] = (),
                           models: Sequence[str | ModelEntry | Mapping[str, Any]] = (), *,
                           suite: str | Path | None = None,
                           views: Callable[..., Path] | None = None, compare_dir: str | Path | None = None,
                           **options: Any) -> MatrixResult:
    """Run every (benchmark, model) pair; `options` are `evalkit.run`'s (a benchmark's own options go to
    that benchmark's pairs) and override the suite file's values. `views(run_dirs, out=...)` writes a
    benchmark's site (evalkit.build_view); `compare_dir`: where a one-benchmark matrix's comparison goes
    (else OUT/compare-<bench>). EvalkitError when a pair cannot start: nothing was sent."""
    pairs, root = plan_pairs(benches, models, suite, options)
    deciders = deciders_for(pairs, options)  # --until-decided's flags refused before anything else
    env: Mapping[str, str] = options.get("env") or os.environ
    for pair in pairs:  # every pair checked before anything is read, asked or written
        s = resolve_settings(pair.bench, pair.model, pair.options)
        pair_env = {**env, "OPENAI_API_VERSION": s.config.api_version} if s.config.api_version else env
        check_budget_flags(s.config, pair_env)
        await specs_for(s.config, pair_env)
    held = next((name for name in RUN_FILES if (root / name).exists()), None)
    if held is not None:
        raise EvalkitError(f"--out {root}: is a run directory (it holds {held}); a matrix's --out is the folder "
                           "its runs go in: give a new or other folder")
    # a plot process serves one run: the pairs draw their own plots
    hooks = {k: v for k, v in options.items() if k in HOOKS and k not in (*MATRIX_HOOKS, "plotter", "stop_rule")}
    if options.get("dry_run"):
        return await _dry_run(pairs, root, hooks, deciders)
    return await _run(pairs, root, hooks, options, views, deciders, compare_dir)


def _rule_hook(pair: Pair, deciders: Mapping[str, Decider]) -> dict[str, Any]:
    """The pair's `stop_rule` hook: a view onto its benchmark's controller (--until-decided), else none."""
    decider = deciders.get(pair.bench)
    return {"stop_rule": decider.hook(pair.shown)} if decider is not None else {}


async def _dry_run(pairs: list[Pair], root: Path, hooks: dict[str, Any],
                   deciders: Mapping[str, Decider]) -> MatrixResult:
    runs = await asyncio.gather(*(run_async(p.bench, p.model, **p.options, **hooks, **_rule_hook(p, deciders),
                                            runs_root=root) for p in pairs))
    results = [PairResult(p.bench, p.model, p.shown, r) for p, r in zip(pairs, runs, strict=True)]
    return MatrixResult(results, root, dry_run=matrix_dry_run([(p.bench, p.shown, r.summary["dry_run"])
                                                               for p, r in zip(pairs, runs, strict=True)]))


async def _run(pairs: list[Pair], root: Path, hooks: dict[str, Any], options: Mapping[str, Any],
               views: Callable[..., Path] | None, deciders: Mapping[str, Decider],
               compare_dir: str | Path | None = None) -> MatrixResult:
    given: Console | None = hooks.pop("console", None)
    quiet = bool(hooks.get("quiet"))
    display = MatrixDisplay([p.label for p in pairs], given or Console(stderr=True),
                            enabled=bool(options.get("progress", True)) and not quiet)
    line = StartLine(len(pairs))
    limiters = EndpointLimiters()

    async def one(i: int, pair: Pair) -> PairResult:
        gate = _PairGate(line)
        done = PairResult(pair.bench, pair.model, pair.shown)
        progress = pair.options.get("progress", True) and not display.live_mode
        try:
            done.result = await run_async(pair.bench, pair.model, **{**pair.options, "progress": progress}, **hooks,
                                          **_rule_hook(pair, deciders), console=pair_console(pair.label, given, quiet),
                                          runs_root=root, limiters=limiters, start_gate=gate,
                                          watch_progress=display.watch(i))
        except KeyboardInterrupt:  # drained and flushed: resumable
            done.interrupted, done.exit_code = True, 130
        except EvalkitError as e:
            done.error, done.exit_code = str(e), e.exit_code
        except Exception as e:  # noqa: BLE001 - the others finish first; raised after them
            done.error, done.exit_code = f"{type(e).__name__}: {e}", 2
            done.result = None
            errors.append(e)
        gate.finish(done.error)
        if pair.bench in deciders:  # its pairs get no more of this model's items
            deciders[pair.bench].finish(pair.shown)
        if done.result is not None:
            done.exit_code = done.result.exit_code
        display.end(i, _state(done))
        return done

    errors: list[BaseException] = []
    benches = [p.bench for p in pairs]
    warm = asyncio.ensure_future(asyncio.to_thread(_warm_compare)) \
        if any(benches.count(b) > 1 for b in benches) else None
    with display:
        results = list(await asyncio.gather(*(one(i, p) for i, p in enumerate(pairs))))
    if warm is not None:
        await warm
    if errors:
        raise errors[0]
    if any(r.interrupted for r in results):
        raise KeyboardInterrupt
    if line.failed is not None:  # a pair could not start: nothing was sent for any pair
        raise EvalkitError(line.failed)
    out = MatrixResult(results, root, deciders=dict(deciders))
    _compare_each(out, pairs, views, plots=bool(options.get("plots", True)), compare_dir=compare_dir)
    codes = {r.exit_code for r in results}
    out.exit_code = 2 if 2 in codes else 1 if codes - {0} else 0
    return out


def _state(done: PairResult) -> str:
    if done.interrupted:
        return "interrupted (resumable)"
    if done.result is None:
        return f"stopped: {done.error}"
    summary = done.result.summary
    if summary.get("complete", True):
        return "done"
    if summary.get("stopped") == "sample":
        return "decided" if (summary.get("sample") or {}).get("rule") == "until-decided" else "sampled"
    return f"incomplete ({summary.get('missing', 0):,} missing)" if done.exit_code == 1 else "stopped"


def _warm_compare() -> None:
    """Import what the comparisons need (scipy's binomial kernels) while the pairs ask."""
    with contextlib.suppress(Exception):  # the comparison says what is wrong, in its turn
        import scipy.special._ufuncs  # noqa: F401


def _compare_each(out: MatrixResult, pairs: list[Pair], views: Callable[..., Path] | None, plots: bool,
                  compare_dir: str | Path | None = None) -> None:
    """Per benchmark: the comparison of its finished pairs (two or more) and, with `views`, its site."""
    for bench in dict.fromkeys(p.bench for p in pairs):
        done = [r for r in out.pairs if r.bench == bench and r.result is not None]
        dirs = [r.result.out_dir for r in done if r.result is not None]
        labels = {r.result.out_dir: r.shown for r in done if r.result is not None and r.shown != r.model}
        decider = out.deciders.get(bench)
        if len(dirs) >= 2:
            try:
                where = Path(compare_dir) if compare_dir is not None else out.out / f"compare-{bench}"
                out.comparisons[bench] = compare(dirs, out=where, labels=labels, plots=plots,
                                                 until_decided=decider.entries() if decider is not None else None)
            except EvalkitError as e:
                out.messages.append(f"compare-{bench}: not written: {e}")
        if views is not None and dirs:
            try:
                out.sites[bench] = views(dirs, out=out.out / f"view-{bench}")
            except EvalkitError as e:
                out.messages.append(f"view-{bench}: not written: {e}")
