"""`--to eee`: Every Eval Ever's aggregate JSON and instance-level JSON Lines (its schema 0.2.2).

Per run, `OUT/<benchmark>/<developer>/<model>/<uuid>.json` (the aggregate: one evaluation result per
official metric, the headline with its bootstrap interval) and `<uuid>.jsonl` beside it (one line per
query), the folder layout of the Every Eval Ever datastore. The uuid is derived from the run's records
and summary, so exporting the same run again rewrites the same two files. Where the schema wants text
(every `additional_details`), nested values are JSON strings. docs/export.md has the field mapping.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.usage import Usage
from evalkit.data.source import parse_hub
from evalkit.export.runs import ExportRun, shareable, without_secrets
from evalkit.metrics.analysis.result import N_BOOT
from evalkit.money.costs import list_cost, record_cost
from evalkit.money.shown import run_costs
from evalkit.providers.registry import find

SCHEMA_VERSION = "0.2.2"
INSTANCE_SCHEMA_VERSION = "instance_level_eval_0.2.2"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def write_eee(run: ExportRun, out: Path, *, organization: str, now: float) -> tuple[Path, Path]:
    """Write one run's aggregate JSON and instance JSON Lines under `out`; returns their paths."""
    ident = model_id(run.model)
    folder = out.joinpath(_safe(run.benchmark), *(_safe(part) for part in ident.split("/")))
    folder.mkdir(parents=True, exist_ok=True)
    name = str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalkit:{run.name}:{run.records_sha256()}:"
                                               f"{json.dumps(run.summary, sort_keys=True, default=str)}"))
    evaluation_id = f"{run.benchmark}/{ident}/{now!r}"
    headline = _headline(run)
    lines = [json.dumps(instance(run, r, evaluation_id, headline), ensure_ascii=False) + "\n" for r in run.records]
    body = "".join(lines).encode("utf-8")
    detail_path = folder / f"{name}.jsonl"
    _write(detail_path, body)
    aggregate = aggregate_log(run, evaluation_id, organization=organization, now=now)
    aggregate["detailed_evaluation_results"] = {
        "format": "jsonl", "file_path": detail_path.name, "hash_algorithm": "sha256",
        "checksum": hashlib.sha256(body).hexdigest(), "total_rows": len(lines)}
    json_path = folder / f"{name}.json"
    _write(json_path, (json.dumps(aggregate, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return json_path, detail_path


def model_id(spec: str) -> str:
    """The model in Hugging Face form: `org/name` where the spec names one (vllm/Qwen/Qwen2-VL-7B,
    openrouter/anthropic/claude-…), else the spec itself (openai/gpt-4o)."""
    _, _, name = spec.partition("/")
    return name if "/" in name.strip("/") else spec


def aggregate_log(run: ExportRun, evaluation_id: str, *, organization: str, now: float) -> dict[str, Any]:
    """The aggregate record (eval.schema.json) of one run, without its detailed_evaluation_results."""
    when = _evaluated_at(run)
    source = source_data(run)
    generation = generation_config(run)
    headline = _headline(run)
    results = []
    for metric, value in run.metrics().items():
        if _is_count(metric):
            continue
        result: dict[str, Any] = {
            "evaluation_result_id": f"{run.benchmark}/{metric}",
            "evaluation_name": f"{run.benchmark}/{metric}",
            "source_data": source,
            "metric_config": {"evaluation_description": f"{run.benchmark} {metric}, {run.summary.get('mode') or 'official'}"
                                                        " mode, as evalkit computes it",
                              "metric_id": f"evalkit.{run.benchmark}.{metric}", "metric_name": metric,
                              "lower_is_better": False},
            "score_details": {"score": value},
            "generation_config": generation,
        }
        if when:
            result["evaluation_timestamp"] = when
        if headline and metric == headline["metric"]:
            result["score_details"] = headline_score(run, value)
        results.append(result)
    if not results:
        raise EvalkitError(f"{run.path}: summary.json has no numeric metric to export")
    log: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "retrieved_timestamp": repr(now),
        "source_metadata": source_metadata(run, organization),
        "model_info": model_info(run),
        "eval_library": eval_library(run),
        "evaluation_results": results,
    }
    if when:
        log["evaluation_timestamp"] = when
    return log


def headline_score(run: ExportRun, value: float) -> dict[str, Any]:
    """The headline's score with the run's 95% bootstrap interval (items resampled with replacement)."""
    h = run.summary["headline"]
    lo, hi = h["ci95"]
    uncertainty: dict[str, Any] = {
        "confidence_interval": {"lower": float(lo), "upper": float(hi), "confidence_level": 0.95,
                                "method": "bootstrap percentile interval, items resampled with replacement"},
        "num_bootstrap_samples": N_BOOT}
    if isinstance(h.get("n_units"), int):
        uncertainty["num_samples"] = h["n_units"]
    details = {"headline": "true"}
    repeats = run.summary.get("repeats")
    if isinstance(repeats, dict) and isinstance(repeats.get("sd"), dict) and h["metric"] in repeats["sd"]:
        details["repeats"] = str(repeats.get("n"))
        details["sd_over_repeats"] = json.dumps(repeats["sd"][h["metric"]])
    return {"score": value, "uncertainty": uncertainty, "details": details}


def source_metadata(run: ExportRun, organization: str) -> dict[str, Any]:
    costs = run_costs(run.summary)  # paid and list, as every report says them
    details = {"run_directory": run.name, "benchmark": run.benchmark, "mode": str(run.summary.get("mode") or ""),
               "complete": json.dumps(run.summary.get("complete")),
               "data_source": _json(run.data_source), "manifest": _json(without_secrets(shareable(run.manifest))),
               "counts": _json(run.summary.get("counts")), "usage": _json(run.summary.get("usage")),
               "cost": costs.text(), "paid_usd": _json(costs.paid), "list_cost_usd": _json(costs.listed),
               "settings": _json(run.settings())}
    if isinstance(run.summary.get("service_tier"), dict):  # the tier asked for and the answers per tier served
        details["service_tier"] = _json(run.summary["service_tier"])
    return {"source_name": "evalkit", "source_type": "evaluation_run", "source_organization_name": organization,
            "evaluator_relationship": "third_party", "additional_details": details}


def source_data(run: ExportRun) -> dict[str, Any]:
    """Where the data came from: a Hub dataset, an archive URL, or (local files, the bundled sample)
    `other`, identified by the data's sha256. data_source is kept whole as JSON text."""
    ds = run.data_source or {}
    details = {"data_source": _json(ds)}
    sha = run.config.get("data_sha256")
    if isinstance(sha, str):
        details["data_sha256"] = sha
    kind, uri = ds.get("kind"), str(ds.get("uri") or "")
    pin = ds.get("commit") or ds.get("revision")
    if kind == "hub":
        try:
            ref = parse_hub(uri)
        except EvalkitError:
            ref = None
        if ref is not None:
            out: dict[str, Any] = {"dataset_name": run.benchmark, "source_type": "hf_dataset", "hf_repo": ref.repo,
                                   "additional_details": details}
            if pin or ref.revision:
                out["hf_revision"] = str(pin or ref.revision)
            if isinstance(run.summary.get("n_items"), int):
                out["samples_number"] = run.summary["n_items"]
            return out
    if kind == "archive" and uri:
        return {"dataset_name": run.benchmark, "source_type": "url", "url": [uri], "additional_details": details}
    other: dict[str, Any] = {"dataset_name": run.benchmark, "source_type": "other", "additional_details": details}
    if isinstance(sha, str):
        other["source_id"] = f"sha256:{sha}"
    if pin:
        other["source_version"] = str(pin)
    return other


def model_info(run: ExportRun) -> dict[str, Any]:
    provider, _, name = run.model.partition("/")
    ident = model_id(run.model)
    info: dict[str, Any] = {"name": name or run.model, "id": ident}
    record = find(provider)  # a cloud serving several vendors' models (vertex/claude-…): the vendor developed it
    vendor = find(record.model_vendor(name) or "") if record is not None and record.model_vendor is not None else None
    developer = ((record.developer if record is not None else None) or (vendor.developer if vendor else None)
                 or (ident.split("/")[0] if ident != run.model else None))
    if developer:
        info["developer"] = developer
    endpoint = run.config.get("endpoint")
    if record is not None and record.self_hosted:  # a server the user runs: the engine, and its version
        server = (run.manifest.get("servers") or {}).get(endpoint) if isinstance(endpoint, str) else None
        engine = {"name": provider}
        if isinstance(server, dict) and server.get("version"):
            engine["version"] = str(server["version"])
        info["inference_engine"] = engine
    elif record is not None:
        info["inference_platform"] = provider
    details = {"spec": run.model, "provider": provider}
    if isinstance(endpoint, str):
        details["endpoint"] = endpoint
    served = (run.summary.get("provenance") or {}).get("served_by") or run.manifest.get("served_by")
    if served:
        details["served_by"] = _json(served)
    info["additional_details"] = details
    return info


def eval_library(run: ExportRun) -> dict[str, Any]:
    version = run.summary.get("evalkit_version") or run.manifest.get("evalkit") or "unknown"
    details = {k: (v if isinstance(v, str) else _json(v)) for k, v in run.manifest.items()
               if k in ("git_commit", "python", "platform", "sdks") and v is not None}
    return {"name": "evalkit", "version": str(version), "additional_details": details}


def generation_config(run: ExportRun) -> dict[str, Any]:
    """The generation settings the run asked with (the schema's own names) and the rest as JSON text."""
    config = run.config
    sent = config.get("generation_sent") or config.get("generation") or {}
    args: dict[str, Any] = {}
    for key in ("temperature", "top_p"):
        if key in sent and (sent[key] is None or isinstance(sent[key], (int, float))):
            args[key] = sent[key]
    if isinstance(sent.get("max_tokens"), int) and sent["max_tokens"] >= 1:
        args["max_tokens"] = sent["max_tokens"]
    if "reasoning_effort" in config or "thinking_budget" in config:
        args["reasoning"] = bool(config.get("reasoning_effort")) or bool(config.get("thinking_budget"))
    details = {k: _json(config.get(k)) for k in ("generation", "generation_sent", "options", "judge")
               if k in config}
    details["mode"] = str(run.summary.get("mode") or "official")
    return {"generation_args": args, "additional_details": details}


def instance(run: ExportRun, r: Record, evaluation_id: str, headline: dict[str, Any] | None) -> dict[str, Any]:
    """One query's line (instance_level_eval.schema.json, single_turn)."""
    usage = Usage.from_dict(r.usage)
    cost, listed = record_cost(run.price, r), list_cost(run.price, r)
    metric = headline["metric"] if headline else None
    line: dict[str, Any] = {
        "schema_version": INSTANCE_SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": model_id(run.model),
        "evaluation_name": f"{run.benchmark}/{metric}" if metric else run.benchmark,
        "sample_id": r.query_id,
        "sample_hash": hashlib.sha256((r.prompt + r.gold).encode("utf-8")).hexdigest(),
        "interaction_type": "single_turn",
        "input": {"raw": r.prompt, "reference": [r.gold]},
        "output": {"raw": [r.response] if r.response is not None else []},
        "answer_attribution": [] if r.parsed is None else [{
            "turn_idx": 0, "source": "output.raw", "extracted_value": r.parsed,
            "extraction_method": r.parse_method or "unknown", "is_terminal": True}],
        "evaluation": {"score": 1.0 if r.correct else 0.0, "is_correct": r.correct is True},
        "token_usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                        "total_tokens": usage.input_tokens + usage.output_tokens,
                        "input_tokens_cache_read": usage.cached_input_tokens,
                        "reasoning_tokens": usage.reasoning_tokens},
        "performance": {"latency_ms": max(0.0, r.latency_s) * 1000.0,
                        "additional_details": {"cached": json.dumps(r.cached)}
                        | ({"cost_usd": repr(cost)} if cost is not None else {})
                        | ({"list_cost_usd": repr(listed)} if listed is not None else {})},
        "error": f"{r.error}: {r.error_message}" if r.error and r.error_message else r.error,
        "metadata": _metadata(r),
    }
    if metric:
        line["evaluation_result_id"] = f"{run.benchmark}/{metric}"
    return line


def verdict(r: Record) -> str:
    if r.error:
        return "error"
    if r.refusal:
        return "refusal"
    if r.correct:
        return "correct"
    return "unparsed" if r.parsed is None else "wrong"


def _metadata(r: Record) -> dict[str, str]:
    out = {"item_id": r.item_id, "variant": _json(r.variant), "verdict": verdict(r),
           "parse_method": r.parse_method or "", "category": r.category}
    for key in ("finish_reason", "served_by", "via", "served_tier"):
        value = getattr(r, key)
        if value is not None:
            out[key] = str(value)
    if r.repeat:
        out["repeat"] = str(r.repeat)
    return out


def _headline(run: ExportRun) -> dict[str, Any] | None:
    """summary.json's headline when it names a metric of the run with its interval."""
    h = run.summary.get("headline")
    if not isinstance(h, Mapping) or not isinstance(h.get("ci95"), list) or len(h["ci95"]) != 2:
        return None
    if h.get("metric") not in run.metrics() or not all(isinstance(x, (int, float)) for x in h["ci95"]):
        return None
    return dict(h)


def _is_count(metric: str) -> bool:
    """Sample sizes (n, n_questions, …/n) are not scores: they are not exported as results."""
    last = metric.rsplit("/", 1)[-1]
    return last == "n" or last.startswith("n_")


def _evaluated_at(run: ExportRun) -> str | None:
    try:
        mtime = (run.path / "summary.json").stat().st_mtime
    except OSError:
        return None
    return datetime.fromtimestamp(mtime, timezone.utc).isoformat(timespec="seconds")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _safe(part: str) -> str:
    cleaned = _UNSAFE.sub("_", part).strip("._")
    return cleaned or "_"


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
