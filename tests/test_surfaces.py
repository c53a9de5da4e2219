"""The public surfaces stay what they are while the code behind them moves (issue 58): the REST API's OpenAPI
document and every `ragd ... --help` text are compared with the copies kept in tests/golden/. An intended change of
a surface rewrites them: `RAGD_WRITE_GOLDEN=1 pytest tests/test_surfaces.py`, and the diff is reviewed with the
change."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ragd.cli import main
from ragd.server import create_app

GOLDEN = Path(__file__).parent / "golden"
WIDTH = 100  # the help texts' wrapping width, fixed (a terminal's would vary)


def _compare(name: str, current: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RAGD_WRITE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(current, encoding="utf-8")
    assert path.exists(), f"no {path.name}: write it with RAGD_WRITE_GOLDEN=1"
    assert current == path.read_text(encoding="utf-8"), f"{name} changed: review, then RAGD_WRITE_GOLDEN=1"


def test_the_openapi_document_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGD_HOME", str(tmp_path))  # building the app touches no database
    document = create_app().openapi()
    _compare("openapi.json", json.dumps(document, indent=1, sort_keys=True) + "\n")


def _paths(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's path under the group, the group's own first, in name order."""
    out = [path]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            out += _paths(command.commands[name], (*path, name))
    return out


def test_every_help_text_is_unchanged() -> None:
    runner = CliRunner()
    texts: list[str] = []
    for path in _paths(main):
        result: Any = runner.invoke(main, [*path, "--help"], prog_name="ragd", terminal_width=WIDTH)
        assert result.exit_code == 0, (path, result.output)
        texts.append(f"$ ragd {' '.join((*path, '--help'))}\n{result.output}")
    assert len(texts) > 20  # the commands and their groups
    _compare("help.txt", "\n".join(texts))
