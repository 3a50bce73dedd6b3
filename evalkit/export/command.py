"""`evalkit export RUN_DIR... --to eee|mlflow|wandb|csv|jsonl [--out PATH]`: results where teams keep them.

Light at import (the CLI builds every subcommand's parser on start); the targets are imported when run,
the trackers' SDKs only by their own target.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_export_parser(sub: Any) -> None:
    """Register `evalkit export` (the CLI calls this)."""
    p = sub.add_parser("export", help="finished runs to Every Eval Ever JSON, MLflow, W&B, CSV or JSON Lines")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="finished run directories (any benchmarks)")
    p.add_argument("--to", required=True, choices=("eee", "mlflow", "wandb", "csv", "jsonl"),
                   help="eee: Every Eval Ever aggregate JSON + instance JSON Lines per run; mlflow, wandb: one "
                        "tracker run per evalkit run; csv, jsonl: one row per query, every run in one file")
    p.add_argument("--out", help="csv/jsonl: the file; eee: the folder (default RUN_DIR/export/ for one run, "
                                 "runs/export/ for several); wandb: W&B's folder (default WANDB_DIR)")
    p.add_argument("--tracking-uri", help="mlflow: the tracking store (default MLFLOW_TRACKING_URI, else mlflow's "
                                          "own default), e.g. sqlite:///mlflow.db or http://host:5000")
    p.add_argument("--project", help="mlflow: the experiment; wandb: the project (default evalkit, or "
                                     "MLFLOW_EXPERIMENT_NAME / WANDB_PROJECT)")
    p.add_argument("--organization", help="eee: who ran the evaluation (source_organization_name; default "
                                          "'unspecified')")


def cmd_export(args: argparse.Namespace, console: Any) -> int:
    from evalkit.export import export

    export(args.run_dirs, args.to, out=args.out, tracking_uri=args.tracking_uri, project=args.project,
           organization=args.organization,
           say=lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True))
    return 0
