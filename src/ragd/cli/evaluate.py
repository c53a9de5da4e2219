"""`ragd eval` (retrieval, answers and filings, with quality gates), `ragd conformance` and `ragd redteam`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import InvalidRequest
from .base import LineProgress, common, emit_json, err, fail, handle_errors, main, open_client, out, print_table

# -- eval ----------------------------------------------------------------------------------------------

QUALITY_EXIT = 5


@main.command("eval")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--plans", default=None,
              help="Comma-separated: lexical, vector, rrf, weighted, weighted:KEYWORD_WEIGHT; add +rerank to "
                   "rerank a plan (e.g. weighted,weighted+rerank). Default: lexical,vector,rrf,weighted, or none "
                   "with --answers.")
@common
@click.option("--embedder", "-e", help="Embedder for the corpus collection (default: RAGD_EMBEDDER).")
@click.option("--depth", default=100, show_default=True, type=click.IntRange(10, 1000),
              help="Results per query (pools grow to match).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              help="Folder for results.json/csv, per_query.csv, chart.png (and answers.json, answers_per_query.csv).")
@click.option("--max-queries", type=click.IntRange(1), help="Evaluate only the first N queries (file order).")
@click.option("--fail-under", multiple=True, metavar="PLAN:METRIC=VALUE",
              help="Exit 5 when a plan scores below the value, e.g. lexical:ndcg@10=0.67; answers:abstain_f1=0.8 "
                   "gates the held-out answer figures (repeatable).")
@click.option("--fail-over", multiple=True, metavar="PLAN:METRIC=VALUE",
              help="Exit 5 when a figure where lower is better is above the value, e.g. "
                   "answers:wrong_document_answers=0.2 (repeatable).")
@click.option("--answers", is_flag=True,
              help="Also evaluate answers: calibrate abstention on a scope split, then ask every question.")
@click.option("--calibrate/--no-calibrate", default=True, show_default=True,
              help="With --answers: choose the abstain thresholds on the calibration half (else the configured).")
@click.option("--min-answered", default=0.9, show_default=True, type=click.FloatRange(0, 1),
              help="With --answers: the share of answerable in-scope questions the thresholds must keep answered.")
@click.option("--documents", "documents", type=click.Path(path_type=Path, file_okay=False),
              help="For a filings set (FinanceBench's JSONL): the folder of its <doc_name>.pdf (default: pdfs/ "
                   "beside the file).")
@click.option("--json", "as_json", is_flag=True, help='Print {"plans": {...}} as one JSON object.')
@click.option("--save", is_flag=True,
              help="Keep the figures in the store (per plan; answers' held-out figures as plan 'answers'), to be "
                   "compared over time on the web page and at GET /v1/evals.")
@handle_errors
def eval_command(path: Path, plans: str | None, collection: str | None, tenant: str | None, embedder: str | None,
                 depth: int, out_dir: Path | None, max_queries: int | None, fail_under: Sequence[str],
                 fail_over: Sequence[str], answers: bool,
                 calibrate: bool, min_answered: float, documents: Path | None, as_json: bool, save: bool) -> None:
    """Measure retrieval quality, several plans side by side, on a BEIR directory, a SQuAD JSON file or a
    ragd questions JSONL file (against --collection); with --answers, answer quality and calibrated abstention.
    A filings set (FinanceBench's JSONL, its PDFs in --documents) is ingested under neutral names and measured
    for the right filing, the evidence page and the answers (gates name plan `filings`)."""
    from ..eval import report as eval_report
    from ..eval.answers import evaluate_answers
    from ..eval.datasets import load
    from ..eval.filings import is_filings
    from ..eval.runner import evaluate

    gates = [(*_parse_gate(g), "under") for g in fail_under] + [(*_parse_gate(g, "--fail-over"), "over")
                                                                for g in fail_over]
    if is_filings(path):
        _eval_filings(path, documents, collection, tenant, embedder, out_dir, max_queries, gates, as_json, save)
        return
    plans = plans if plans is not None else ("" if answers else "lexical,vector,rrf,weighted")
    names = [p.strip() for p in plans.split(",") if p.strip()]
    if not names and not answers:
        raise InvalidRequest(f"--plans {plans!r} names no plan; e.g. --plans lexical,vector,rrf,weighted")
    full = load(path)
    client = open_client(embedder, eval_mode=True)
    live = err.is_terminal and not as_json
    lines = LineProgress(client.settings.progress_interval_s)
    with Progress(TextColumn("[bold]{task.fields[stage]}[/]"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not live) as progress:
        task = progress.add_task("", total=None, stage="eval")

        def on_progress(stage: str, done: int, total: int, note: str = "") -> None:
            progress.update(task, completed=done, total=total, stage=f"{stage} {note}".strip())
            if not live:
                lines.update(stage, done, total, note)

        result = evaluate(client, full.head(max_queries), names, collection=collection, tenant=tenant,
                          depth=depth, on_progress=on_progress) if names else None
        answered = evaluate_answers(client, full, collection=collection if not names else None, tenant=tenant,
                                    calibrate=calibrate, min_answered=min_answered, max_queries=max_queries,
                                    on_progress=on_progress) if answers else None
    folder = out_dir or client.settings.home / "eval" / full.name
    outputs = eval_report.write(result, folder) if result else {}
    if answered:
        outputs.update(eval_report.write_answers(answered, folder))
    payload = {**(result.as_dict() if result else {"dataset": full.name}), "outputs": outputs}
    if answered:
        payload["answers"] = answered.as_dict()
    if save:
        payload["eval_id"] = str(_save_evaluation(client, full.name, tenant, result, answered, max_queries, depth))
    if as_json:
        emit_json(payload)
    else:
        if result:
            _print_eval(result, outputs)
        if answered:
            _print_answers(answered, full.name)
        out.print("written: " + ", ".join(outputs.values()))
        if save:
            out.print(f"kept as evaluation {payload['eval_id']} (GET /v1/evals)")
    if answered and answered.failed:
        first = next(iter(answered.failed.values()))
        err.print(f"[yellow]warning:[/] {len(answered.failed)} questions failed and are not scored (first: "
                  f"{first})", markup=True)
    def value_of(plan: str, metric: str) -> Any:
        if plan == "answers":
            if answered is None:
                raise InvalidRequest("a gate on answers:… needs --answers")
            return answered.parts["held_out"].get(metric)
        if result is None or plan not in result.plans:
            raise InvalidRequest(f"a gate names plan {plan!r}, which was not run (--plans {plans})")
        return result.plans[plan].metrics.get(metric)

    _check_gates(gates, value_of)


def _check_gates(gates: Sequence[tuple[str, str, float, str]], value_of: Callable[[str, str], Any]) -> None:
    """Exit QUALITY_EXIT naming every gate a figure fails (`value_of(plan, metric)` reads a figure)."""
    failures = []
    for plan, metric, bound, direction in gates:
        value = value_of(plan, metric)
        if not isinstance(value, float | int):
            raise InvalidRequest(f"a gate names unknown metric {metric!r}")
        if value < bound if direction == "under" else value > bound:
            failures.append(f"{plan} {metric} = {value:.4f} {'<' if direction == 'under' else '>'} {bound}")
    if failures:
        click.echo("quality gate failed: " + "; ".join(failures), err=True)
        sys.exit(QUALITY_EXIT)


def _eval_filings(path: Path, documents: Path | None, collection: str | None, tenant: str | None,
                  embedder: str | None, out_dir: Path | None, max_queries: int | None,
                  gates: Sequence[tuple[str, str, float, str]], as_json: bool, save: bool) -> None:
    from ..eval.filings import evaluate_filings, load_filings, write_filings

    filings = load_filings(path, documents)
    client = open_client(embedder, eval_mode=True)
    lines = LineProgress(client.settings.progress_interval_s)
    report = evaluate_filings(client, filings, collection=collection, tenant=tenant, max_queries=max_queries,
                              on_progress=lambda stage, done, total, note="": lines.update(stage, done, total,
                                                                                          note))
    outputs = write_filings(report, out_dir or client.settings.home / "eval" / filings.name)
    payload = {"dataset": filings.name, **report.as_dict(), "outputs": outputs}
    if save:
        payload["eval_id"] = str(client.save_evaluation(
            collection=report.collection, dataset=filings.name, tenant=tenant, kind="answers",
            metrics={"filings": report.figures}, config={"max_queries": max_queries}))
    if as_json:
        emit_json(payload)
    else:
        table = Table(title=f"{filings.name}: {report.figures['questions']} questions over {report.documents} "
                            f"documents ({report.pages} pages, ingested in {report.ingest_seconds:.0f} s)")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for name, value in report.figures.items():
            if isinstance(value, dict):
                for stage, ms in value.items():
                    table.add_row(f"{name.removesuffix('_ms')} {stage} (ms)", f"{ms:.1f}")
            else:
                table.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value))
        out.print(table)
        out.print("written: " + ", ".join(outputs.values()))
    if report.failed:
        err.print(f"[yellow]warning:[/] {len(report.failed)} questions failed and are not scored (first: "
                  f"{next(iter(report.failed.values()))})", markup=True)

    def value_of(plan: str, metric: str) -> Any:
        if plan != "filings":
            raise InvalidRequest(f"a gate names plan {plan!r}; a filings set's figures are plan 'filings'")
        return report.figures.get(metric)

    _check_gates(gates, value_of)


def _save_evaluation(client: Any, dataset: str, tenant: str | None, result: Any, answered: Any,
                     max_queries: int | None, depth: int) -> Any:
    """Keep an evaluation's figures: each plan's metrics and latency, and the answers' held-out figures."""
    metrics: dict[str, dict[str, Any]] = {}
    if result:
        for name, plan in result.plans.items():
            metrics[name] = {**plan.metrics, **{f"latency_{k}_ms": v for k, v in plan.latency_ms.items()}}
    if answered:
        metrics["answers"] = dict(answered.parts.get("held_out", {}))
    collection = result.collection if result else answered.collection
    return client.save_evaluation(collection=collection, dataset=dataset, tenant=tenant,
                                  kind="retrieval" if result else "answers", metrics=metrics,
                                  config={"max_queries": max_queries, "depth": depth,
                                          "embed_model": result.embed_model if result else None})


def _parse_gate(text: str, option: str = "--fail-under") -> tuple[str, str, float]:
    plan, _, rest = text.partition(":")
    metric, _, value = rest.partition("=")
    try:
        return plan, metric, float(value)
    except ValueError as exc:
        raise InvalidRequest(f"{option} {text!r}: expected PLAN:METRIC=VALUE, e.g. lexical:ndcg@10=0.67") from exc


def _print_eval(result: Any, outputs: dict[str, str]) -> None:
    from ..eval.metrics import METRICS

    title = (f"{result.dataset}: {result.queries} queries, collection {result.collection} ({result.embed_model}), "
             f"depth {result.depth}")
    table = Table(title=title)
    table.add_column("plan")
    for m in METRICS:
        table.add_column(m, justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    for name, plan in result.plans.items():
        table.add_row(f"{name} (default)" if name == result.default_plan else name,
                      *(f"{plan.metrics[m]:.4f}" for m in METRICS),
                      f"{plan.latency_ms['p50']:.1f}", f"{plan.latency_ms['p95']:.1f}")
    out.print(table)
    stages = Table(title="latency per stage (p50 / p95 ms)")
    stages.add_column("plan")
    all_stages = sorted({s for p in result.plans.values() for s in p.stages_ms})
    for s in all_stages:
        stages.add_column(s, justify="right")
    for name, plan in result.plans.items():
        stages.add_row(name, *(f"{plan.stages_ms[s]['p50']:.1f} / {plan.stages_ms[s]['p95']:.1f}"
                               if s in plan.stages_ms else "-" for s in all_stages))
    out.print(stages)
    for name, plan in result.plans.items():  # a plan's figures are what its name says only when both are 0
        if plan.rerank_skipped:
            out.print(f"WARNING: {name}: the reranker failed open on {plan.rerank_skipped} of {result.queries} "
                      "queries (the fused order stood in); see RAGD_EVAL_RERANK_TIMEOUT_S", markup=False)
        for qid, error in sorted(plan.failed_queries.items())[:5]:
            out.print(f"WARNING: {name}: query {qid} failed and counts as a miss: {error}", markup=False)
        if len(plan.failed_queries) > 5:
            out.print(f"WARNING: {name}: {len(plan.failed_queries) - 5} more queries failed", markup=False)
    if result.ingest:
        counts = {k: v for k, v in result.ingest.items() if k != "failed_items"}
        out.print(f"corpus: {json.dumps(counts)}")
        for item in result.ingest.get("failed_items", []):
            out.print(f"  failed {item['item']} [{item['code']}]: {item['reason']}", markup=False)
        if result.ingest.get("judged_missing"):
            out.print(f"warning: {result.ingest['judged_missing']} of {result.ingest['judged_documents']} judged "
                      "documents are not in the collection: no plan can find them")
    if result.default_plan:
        out.print("(default): the plan `ragd search` uses unless told otherwise")


ANSWER_COLUMNS = ("questions", "abstain_precision", "abstain_recall", "abstain_f1", "answered",
                  "adversarial_abstained", "answer_recall", "token_f1", "citation_precision", "citation_recall",
                  "wrong_document_answers", "at_most_3_pieces")


def _print_answers(report: Any, dataset: str) -> None:
    split, th = report.split, report.thresholds
    out.print(f"[bold]answers[/] on {dataset}: collection {report.collection} holds {split['documents']} documents "
              f"of {split['groups_in_scope']} groups; asked {split['asked']} questions ({split['in_scope']} in "
              f"scope, {split['out_of_scope']} out of scope, {split['adversarial']} adversarial unanswerable)")
    how = (f"calibrated on {th.get('questions', 0)} questions of the calibration half" if th.get("calibrated")
           else "as configured")
    out.print(f"abstain thresholds ({how}): rerank {th['rerank']}, rrf {th['rrf']}")
    table = Table(title="answers (abstain figures: abstaining is the positive class; answered: in-scope answerable)")
    table.add_column("part")
    for column in ANSWER_COLUMNS:
        table.add_column(column.replace("_", " "), justify="right")
    table.add_column("p50 / p95 ms", justify="right")
    for part, values in report.parts.items():
        cells = [str(values[c]) if isinstance(values[c], int) else "-" if values[c] is None else f"{values[c]:.3f}"
                 for c in ANSWER_COLUMNS]
        table.add_row(part, *cells, f"{values['latency_ms']['p50']:.0f} / {values['latency_ms']['p95']:.0f}")
    out.print(table)
    stages = report.parts["held_out"]["stages_ms"]
    out.print("held-out stages p50/p95 ms: " + ", ".join(f"{s} {v['p50']:.0f}/{v['p95']:.0f}"
                                                         for s, v in stages.items()))
    for part, values in report.parts.items():
        if values.get("arithmetic_answered"):
            out.print(f"{part} arithmetic questions answered: {values['arithmetic_answered']}, with a computation "
                      f"{values['arithmetic_computed']:.3f}, exact {values['arithmetic_exact']:.3f}, by quotes alone "
                      f"{values['arithmetic_quotes_only']:.3f}")


# -- conformance ---------------------------------------------------------------------------------------


@main.command()
@click.option("--embedder", "-e", "embedders", multiple=True, type=click.Choice(["hash", "bge-small-en"]),
              help="Check only this embedder's golden data (repeatable; default: both).")
@click.option("--pin", type=click.Path(path_type=Path), hidden=True,
              help="Write the golden file from this installation (when the spec version changes).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@handle_errors
def conformance(embedders: Sequence[str], pin: Path | None, as_json: bool) -> None:
    """Check this installation against the golden data of the spec version: chunk ids and hashes of a fixed
    corpus, probe vectors, and each plan's top results for fixed queries (tenant 'conformance')."""
    from .. import conformance as suite

    client = open_client()
    if pin is not None:
        suite.pin(client, pin)
        out.print(f"pinned: {pin}")
        return
    report = suite.run(client, tuple(embedders) or suite.EMBEDDERS)
    if as_json:
        emit_json(report.as_dict())
    else:
        print_table(("check", "result", "detail"),
                    ((c.name, "pass" if c.passed else "FAIL", c.detail) for c in report.checks),
                    title=f"conformance with spec v{report.spec_version}: {'pass' if report.passed else 'FAIL'}")
    if not report.passed:
        failed = sum(1 for c in report.checks if not c.passed)
        fail("conformance_failed", f"{failed} of {len(report.checks)} checks failed", QUALITY_EXIT)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@handle_errors
def redteam(as_json: bool) -> None:
    """Prompt-injection, exfiltration, tenant-leak, planted-citation and stale-version probes against `ask`, and
    the REST API reached with one tenant's key for another's objects (tenants 'redteam' and 'redteam-other'); a
    pass/fail table, exit 5 when a probe fails."""
    from .. import redteam as probes

    client = open_client()
    results = probes.run(client) + probes.api_probes(client)
    if as_json:
        emit_json({"passed": all(r.passed for r in results), "probes": probes.as_dicts(results)})
    else:
        print_table(("probe", "result", "expectation", "answer"),
                    ((r.name, "pass" if r.passed else "FAIL", r.expectation, r.answer) for r in results),
                    title=f"red team: {sum(r.passed for r in results)} of {len(results)} probes pass")
    failed = [r.name for r in results if not r.passed]
    if failed:
        fail("redteam_failed", f"{len(failed)} probes failed: {', '.join(failed)}", QUALITY_EXIT)
