"""Evaluation outputs: CSV, JSON, per-query CSV and PNG charts, for retrieval plans and for answers."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from .answers import AnswerReport
from .metrics import METRICS
from .runner import EvalReport

COLUMNS = [*METRICS, "latency_p50_ms", "latency_p95_ms"]


def rows(report: EvalReport) -> list[dict[str, float | str]]:
    out: list[dict[str, float | str]] = []
    for name, result in report.plans.items():
        row: dict[str, float | str] = {"plan": name}
        row.update({m: round(result.metrics[m], 4) for m in METRICS})
        row["latency_p50_ms"] = round(result.latency_ms["p50"], 2)
        row["latency_p95_ms"] = round(result.latency_ms["p95"], 2)
        out.append(row)
    return out


def write(report: EvalReport, out_dir: Path) -> dict[str, str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "csv": out_dir / "results.csv",
             "per_query": out_dir / "per_query.csv", "chart": out_dir / "chart.png"}
    paths["json"].write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with open(paths["csv"], "w", newline="", encoding="utf-8") as fh:
        table = csv.DictWriter(fh, fieldnames=["plan", *COLUMNS])
        table.writeheader()
        table.writerows(rows(report))
    with open(paths["per_query"], "w", newline="", encoding="utf-8") as fh:
        lines = csv.writer(fh)
        lines.writerow(["plan", "query_id", *METRICS])
        for name, result in report.plans.items():
            for qid, values in result.per_query.items():
                lines.writerow([name, qid, *(round(values[m], 4) for m in METRICS)])
    written = {k: str(v) for k, v in paths.items() if k != "chart"}
    if chart(report, paths["chart"]):
        written["chart"] = str(paths["chart"])
    return written


def write_answers(report: AnswerReport, out_dir: Path) -> dict[str, str]:
    """answers.json (thresholds, split, figures per part) and answers_per_query.csv."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"answers_json": out_dir / "answers.json", "answers_per_query": out_dir / "answers_per_query.csv"}
    paths["answers_json"].write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with open(paths["answers_per_query"], "w", newline="", encoding="utf-8") as fh:
        lines = csv.writer(fh)
        lines.writerow(["query_id", "kind", "abstained", "pieces", "cited_docs", "latency_ms", "answer"])
        for a in report.asked:
            lines.writerow([a.qid, a.kind, int(a.abstained), a.pieces, " ".join(a.cited_docs),
                            round(a.latency_ms, 2), a.answer])
    written = {k: str(v) for k, v in paths.items()}
    if answers_chart(report, out_dir / "answers.png"):
        written["answers_chart"] = str(out_dir / "answers.png")
    return written


ANSWER_SHOWN = ("abstain_precision", "abstain_recall", "abstain_f1", "answered", "answer_recall", "token_f1",
                "citation_precision", "citation_recall")


def answers_chart(report: AnswerReport, path: Path) -> bool:
    """The answer figures of each half, side by side; False without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(11, 4))
    parts = list(report.parts)
    width = 0.8 / len(parts)
    for i, part in enumerate(parts):
        values = [float(report.parts[part][m] or 0.0) for m in ANSWER_SHOWN]
        bars = ax.bar([x + i * width for x in range(len(ANSWER_SHOWN))], values, width, label=part)
        ax.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
    ax.set_xticks([x + width * (len(parts) - 1) / 2 for x in range(len(ANSWER_SHOWN))],
                  [m.replace("_", " ") for m in ANSWER_SHOWN])
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    ax.set_ylim(0, 1.18)
    th = report.thresholds
    ax.set_title(f"answers ({report.split['asked']} questions; abstain thresholds rerank {th['rerank']}, "
                 f"rrf {th['rrf']})")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def chart(report: EvalReport, path: Path) -> bool:
    """Quality and latency per plan; False when matplotlib is not installed (pip install 'ragd[eval]')."""
    plt = _pyplot()
    if plt is None:
        return False
    names = list(report.plans)
    shown = ["ndcg@10", "mrr@10", "recall@10", "recall@100"]
    fig, (quality, latency) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(shown)
    for i, metric in enumerate(shown):
        values = [report.plans[n].metrics[metric] for n in names]
        bars = quality.bar([x + i * width for x in range(len(names))], values, width, label=metric)
        quality.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
    quality.set_xticks([x + width * (len(shown) - 1) / 2 for x in range(len(names))], names)
    quality.set_ylim(0, 1.18)
    quality.tick_params(axis="x", rotation=25, labelsize=8)
    quality.set_title(f"{report.dataset}: quality ({report.queries} queries, {report.embed_model})")
    quality.legend(fontsize=7, loc="upper left", ncols=4)
    p50 = [report.plans[n].latency_ms["p50"] for n in names]
    p95 = [report.plans[n].latency_ms["p95"] for n in names]
    latency.bar([x - 0.2 for x in range(len(names))], p50, 0.4, label="p50")
    latency.bar([x + 0.2 for x in range(len(names))], p95, 0.4, label="p95")
    latency.set_xticks(range(len(names)), names)
    latency.tick_params(axis="x", rotation=25, labelsize=8)
    latency.set_ylabel("ms")
    latency.set_title("latency per query")
    latency.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
