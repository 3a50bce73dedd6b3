"""`--to wandb`: one Weights & Biases run per evalkit run, through wandb's own SDK (the `wandb` extra).

config: the run's settings; summary: the official metrics' numeric leaves by flattened name
("per_category/cat0"), with counts/, usage/ and headline/ (its 95% interval) beside them; files:
report.md, summary.json, manifest.json and plots/. W&B's own settings apply as usual: WANDB_MODE=offline
keeps the runs on disk (`wandb sync` uploads them later), WANDB_DIR or --out says where, WANDB_ENTITY
whose they are. Nothing is printed by wandb itself; evalkit says where each run went.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import import_sdk
from evalkit.export.runs import ExportRun, run_metrics

TAG_MAX = 64  # characters W&B keeps of a tag


def export_wandb(runs: Sequence[ExportRun], *, project: str, out_dir: Path | None, say: Any = print) -> list[Path]:
    """Log each run; returns the folders W&B wrote them to (offline-run-… or run-…), in order."""
    wandb = import_sdk("wandb", "evalkit export --to wandb")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    folders: list[Path] = []
    try:
        for run in runs:
            try:
                folders.append(_log_run(wandb, run, project, out_dir))
            except Exception as e:  # wandb's own error (login, network, a refused value)
                done = f" ({len(folders)} earlier run{'s' if len(folders) != 1 else ''} logged)" if folders else ""
                text = " ".join(str(e).split())[:300]
                raise EvalkitError(f"wandb: {run.path}: {type(e).__name__}{': ' + text if text else ''}{done}"
                                   ) from None
            say(f"wandb: {run.path} -> {folders[-1]}")
    finally:
        wandb.teardown()  # wandb's background service ends with the export, not with the process
    return folders


def _log_run(wandb: Any, run: ExportRun, project: str, out_dir: Path | None) -> Path:
    settings = wandb.Settings(console="off", silent=True, save_code=False, disable_git=True, x_disable_stats=True,
                              x_save_requirements=False)
    tags = [t[:TAG_MAX] for t in (run.benchmark, run.model, str(run.summary.get("mode") or "")) if t]
    active = wandb.init(project=project, name=run.name, job_type="evaluation", config=run.settings(), tags=tags,
                        dir=str(out_dir) if out_dir is not None else None, settings=settings)
    try:
        active.summary.update(run_metrics(run))
        for path in run.artifacts():  # copied, not linked: the export is the run as it is now
            copy = Path(active.dir) / path.relative_to(run.path)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
            active.save(str(copy), base_path=active.dir, policy="now")
        folder = Path(active.dir).parent
    except BaseException:
        active.finish(exit_code=1)
        raise
    active.finish(exit_code=0 if run.summary.get("complete", True) else 1)
    return folder
