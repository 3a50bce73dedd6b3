"""TDBench's tables for the console and report.md, built from `TDBench.aggregate`'s metrics.

The paper (arXiv 2504.03748) prints fractions with three decimals: Table 2 (VanillaEval at 0°
against RotationalEval, and the drop), Table 3 (RE, MA, mean VE and the reliability parameters
θ, r, g, A_adj averaged over the dimensions), Tables 5-8 (the same per dimension) and Table 4
(grounding). Then evalkit's categories × rotation table and VLMEvalKit's own RotationalEval table
(open-compass/VLMEvalKit@3ba9220a, vlmeval/dataset/utils/tdbench.py), whose "Average" covers the
multiple-choice file's categories with grounding apart. Pure functions: metrics in, ReportTables out.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.report_table import ReportTable

UNITS = "0–1"  # fractions, three decimals as the paper prints them (evalkit.report.tables.decimals)
PARAMS = ("theta", "r", "g", "A_adj")
MEAN_ROW = "mean"  # the unweighted mean over categories, as the paper averages
HEADS = ("θ", "r", "g", "A_adj")  # the paper's names of PARAMS
# why θ, r, g tables are left out of a sampled run (ReportTable.whole_set)
PER_CATEGORY_SOLUTION = ("the paper solves θ, r, g from each category's whole histogram of right rotations "
                         "(on a sample, whether a category has a solution at all is chance)")


def rotations(metrics: dict[str, Any]) -> list[str]:
    """The acc@<deg> keys of the run, in rotation order."""
    return sorted((k for k in metrics if k.startswith("acc@") and k[4:].isdigit()), key=lambda k: int(k[4:]))


def table_2(metrics: dict[str, Any], label: str) -> ReportTable:
    """VE@0° (accuracy on the unrotated images), RE and Δ = RE − VE@0°, category means."""
    ve0, re = metrics.get("acc@0"), metrics.get("RE")
    delta = re - ve0 if isinstance(re, int | float) and isinstance(ve0, int | float) else None
    return ReportTable("TDBench Table 2: VE@0° vs RE", ("model", "VE@0°", "RE", "Δ"), [[label, ve0, re, delta]],
                       console=True, units=UNITS, note="category means; Δ = RE − VE@0°")


def table_3(metrics: dict[str, Any], label: str) -> ReportTable:
    """RE, MA, mean VE over rotations, and the paper's θ, r, g, A_adj (mean over the solvable categories)."""
    rel = metrics.get("reliability") or {}
    n = rel.get("n_solved", 0) + rel.get("n_unsolvable", 0)
    if not rel:
        how = "θ, r, g, A_adj need 3 rotations or more"
    else:
        how = (f"θ, r, g, A_adj: mean of the paper's solutions over the {rel.get('n_solved', 0)} of {n} "
               "categories with one")
    return ReportTable("TDBench Table 3: RE, MA, VE and reliability", ("model", "RE", "MA", "VE", *HEADS),
                       [[label, metrics.get("RE"), metrics.get("MA"), metrics.get("VE"),
                         *(rel.get(p) for p in PARAMS)]], console=True, units=UNITS,
                       note="category means; VE over the rotations; " + how, whole_set=PER_CATEGORY_SOLUTION)


def categories_table(metrics: dict[str, Any]) -> ReportTable:
    """Each category × (accuracy at each rotation, VE, RE, MA, problems), then the category means."""
    accs = rotations(metrics)
    per = metrics.get("per_category") or {}
    rows = [[cat, *(row.get(k) for k in accs), row.get("VE"), row.get("RE"), row.get("MA"), row.get("n")]
            for cat, row in per.items()]
    rows.append([MEAN_ROW, *(metrics.get(k) for k in accs), metrics.get("VE"), metrics.get("RE"), metrics.get("MA"),
                 metrics.get("n_problems")])
    return ReportTable("TDBench categories × rotation", ("category", *accs, "VE", "RE", "MA", "n"), rows,
                       console=True, units=UNITS, groups=[MEAN_ROW],
                       note="acc@<deg> right at that rotation, VE their mean, RE right at all, MA wrong at all; "
                            "n problems")


def reliability_table(metrics: dict[str, Any]) -> ReportTable | None:
    """Per category, as the paper's Tables 5-8: RE, VE, then θ, r, g, A_adj from the paper's moment
    solution ("—" where there is none) beside evalkit's maximum-likelihood fit ("—" where the data
    cannot identify a parameter: no question guessed leaves g undefined, r = g leaves θ undefined)."""
    paper = metrics.get("reliability_per_category")
    if not isinstance(paper, dict):
        return None
    per, ml = metrics.get("per_category") or {}, metrics.get("reliability_ml_per_category") or {}
    rows = []
    for cat, sol in paper.items():
        fit = ml.get(cat) or {}
        why = "no moment solution" if sol is None else ""
        why = "; ".join(x for x in (why, fit.get("note") or "") if x)
        rows.append([cat, (per.get(cat) or {}).get("RE"), (per.get(cat) or {}).get("VE"),
                     *((sol or {}).get(p) for p in PARAMS), *(fit.get(p) for p in PARAMS), why])
    rel, pooled = metrics.get("reliability") or {}, metrics.get("reliability_ml") or {}
    rows.append([MEAN_ROW, metrics.get("RE"), metrics.get("VE"), *(rel.get(p) for p in PARAMS),
                 *(pooled.get(p) for p in PARAMS), pooled.get("note") or ""])
    head = ("category", "RE", "VE", *HEADS, *(f"ML {g}" for g in HEADS), "note")
    return ReportTable("TDBench reliability per category (θ, r, g, A_adj)", head, rows, units=UNITS, groups=[MEAN_ROW],
                       whole_set=PER_CATEGORY_SOLUTION,
                       note="θ share of questions known, r accuracy when known, g lucky-guess accuracy, A_adj = θ·r. "
                            "The paper's columns: moment solution per category, its mean row over the solvable "
                            "ones; ML: maximum likelihood per category, its mean row pooled over all problems")


def rotational_eval_table(metrics: dict[str, Any]) -> ReportTable | None:
    """VLMEvalKit's RotationalEval rows (categories alphabetically, its "Average" over them) and the
    grounding file's row apart, as it reports them (shares, the Average rounded to 3 places)."""
    per = metrics.get("vlmevalkit_per_category")
    if not isinstance(per, dict) or not per:
        return None
    keys = ("total_questions", "hit_all", "miss_all", "rot0", "rot90", "rot180", "rot270")
    rows = [[cat, *(row.get(k) for k in keys)] for cat, row in per.items()]
    rows.append(["Average", *((metrics.get("vlmevalkit_average") or {}).get(k) for k in keys)])
    grounding = metrics.get("grounding_vlmevalkit")
    if isinstance(grounding, dict) and grounding:
        rows.append(["grounding file (its Average)", *(grounding.get(k) for k in keys)])
    return ReportTable("TDBench as VLMEvalKit reports it (RotationalEval)", ("category", *keys), rows, units=UNITS,
                       groups=["Average"], whole_set="VLMEvalKit's table counts the whole file's questions "
                                                     "(total_questions, hit_all, miss_all)",
                       note="only problems answered at every rotation count; Average is the unweighted mean of "
                            "the multiple-choice categories above it, the grounding file is scored apart")


def grounding_table(metrics: dict[str, Any]) -> ReportTable | None:
    """Visual grounding per rotation (the paper's Table 4 compares mean IoU and centroid containment)."""
    g = metrics.get("grounding")
    if not isinstance(g, dict) or not g:
        return None
    hit = next((k for k in next(iter(g.values())) if k.startswith("acc@iou")), None)
    rows = [[name, row.get("mean_iou"), row.get(hit) if hit else None, row.get("centre_in_box"), row.get("n")]
            for name, row in g.items()]
    threshold = hit[len("acc@iou"):] if hit else "?"
    return ReportTable("TDBench Table 4: visual grounding", ("rotation", "mean IoU", f"IoU ≥ {threshold}",
                                                             "centre in box", "n"), rows, units=UNITS,
                       groups=["all"],
                       note=f"the category tables count a box right when {_criterion(metrics)}; the paper's "
                            "centroid performance is Visual Grounding's RE under the centre criterion (in % there)")


def tdbench_tables(metrics: dict[str, Any], label: str) -> list[ReportTable]:
    """Tables 2 and 3 (console), categories × rotation (console), then reliability, VLMEvalKit, grounding."""
    tables = [table_2(metrics, label), table_3(metrics, label), categories_table(metrics)]
    return tables + [t for t in (reliability_table(metrics), rotational_eval_table(metrics), grounding_table(metrics)) if t]



def _criterion(metrics: dict[str, Any]) -> str:
    name = str(metrics.get("grounding_criterion") or "center")
    return "its centre is inside the true box" if name == "center" else name.replace("iou>=", "its IoU ≥ ")
