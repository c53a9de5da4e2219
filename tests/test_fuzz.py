"""The REST API fuzzed by schemathesis from its own /openapi.json against a running `ragd serve`: every check
(no 5xx, status codes, content types and bodies as documented, valid requests accepted, invalid ones refused),
a bounded number of deterministic examples per operation. Strings may hold NUL (refused where the schema says so,
in bodies, paths and query parameters alike);
tests/schemathesis_hooks.py adds what no schema describes: /v1/index ids holding NUL or a lone surrogate, and
metadata nested up to 900 levels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import REPO, SAMPLES, run_cli, serving


def test_schemathesis_finds_nothing(cli_env: dict[str, str], tmp_path: Path) -> None:
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_TENANT": "fuzz", "RAGD_RATE_LIMIT_PER_MINUTE": "0"}
    assert run_cli(["ingest", str(SAMPLES), "-c", "default"], env).returncode == 0
    key = run_cli(["keys", "create", "--tenant", "fuzz"], env).stdout.strip().splitlines()[-1]
    with serving(env) as server:
        config = str(REPO / "tests" / "schemathesis.toml")
        result = subprocess.run(
            [str(Path(sys.executable).parent / "schemathesis"), "--config-file", config, "run",
             server["url"] + "/openapi.json", "-H", f"Authorization: Bearer {key}", "--max-examples", "15",
             "--generation-deterministic", "--generation-allow-x00", "true", "--suppress-health-check", "all",
             "--no-color"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,  # its cache dir lands there
            env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks", "PYTHONPATH": str(REPO)})
    failures = result.stdout[result.stdout.find("FAILURES"):] if "FAILURES" in result.stdout else result.stdout
    assert result.returncode == 0, failures[:8000]
    assert " passed" in result.stdout and "failures" not in result.stdout.splitlines()[-1]
