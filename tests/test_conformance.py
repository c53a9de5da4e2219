"""`ragd conformance`: the installation matches the golden data pinned for the spec version, and a deviation
in any pinned property is reported as a failed check."""

from __future__ import annotations

import copy
import json

import ragd
from ragd import conformance
from ragd.conformance import conforms

from .conftest import run_cli


def test_the_installation_conforms(cli_env: dict[str, str]) -> None:
    result = run_cli(["conformance", "--json"], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] and report["spec_version"] == conformance.SPEC_VERSION
    names = {c["name"] for c in report["checks"]}
    assert {"hash: chunk ids, indexes, hashes, tokens", "bge-small-en: top-5 weighted"} <= names
    table = run_cli(["conformance", "--embedder", "hash"], cli_env)
    assert table.returncode == 0 and "pass" in table.stdout and "FAIL" not in table.stdout


def test_a_deviation_fails_its_check(client: ragd.Ragd) -> None:
    gold = copy.deepcopy(conformance.golden())
    hashed = gold["embedders"]["hash"]
    hashed["chunks"]["handbook.md"][3][2] = "0" * 64  # one chunk's content hash
    query = conformance.QUERIES[0]
    hashed["search"]["lexical"][query][0][1] += 0.5  # one BM25 score
    first, second = hashed["search"]["vector"][query][:2]
    hashed["search"]["vector"][query][:2] = [second, first]  # an order the scores do not allow
    report = conformance.run(client, ("hash",), gold)
    failed = {c.name for c in report.checks if not c.passed}
    assert failed == {"hash: chunk ids, indexes, hashes, tokens", "hash: top-5 lexical", "hash: top-5 vector"}
    assert not report.passed


def test_conforms_allows_any_order_inside_a_tie_only() -> None:
    want = [["a", 0.9], ["b", 0.5], ["c", 0.5], ["d", 0.1], ["e", 0.1]]
    assert conforms(want, [["a", 0.9], ["c", 0.5], ["b", 0.5], ["d", 0.1], ["e", 0.1]], 1e-5) == ""
    assert conforms(want, [["a", 0.9], ["b", 0.5], ["c", 0.5], ["d", 0.1], ["x", 0.1]], 1e-5) == ""  # cut-off tie
    assert conforms(want, [["b", 0.9], ["a", 0.5], ["c", 0.5], ["d", 0.1], ["e", 0.1]], 1e-5).startswith("ranks 1-1")
    assert conforms(want, [["a", 0.9], ["b", 0.5], ["x", 0.5], ["d", 0.1], ["e", 0.1]], 1e-5).startswith("ranks 2-3")
    assert conforms(want, [["a", 0.9], ["b", 0.5], ["c", 0.5000001], ["d", 0.1], ["e", 0.1]], 1e-5) == ""
    assert conforms(want, [["a", 0.9], ["b", 0.5], ["c", 0.51], ["d", 0.1], ["e", 0.1]], 1e-5).startswith("rank 3")
    assert conforms(want, want[:4], 1e-5) == "4 results, golden 5"
