"""Every CLI error is one line on stderr with the README's exit code, never a traceback or a usage block."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from ragd.cli import main

from .conftest import run_cli

CODES = {0, 1, 2, 3, 4, 5}  # README: exit codes


def invoke(args: list[str], env: dict[str, str], extra: dict[str, str] | None = None) -> Result:
    clean = {k: None for k in os.environ if k.startswith("RAGD_")}
    result = CliRunner().invoke(main, args, env={**clean, **env, **(extra or {})}, catch_exceptions=True)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def one_line_error(result: Result) -> str:
    text = result.stderr.strip()
    assert "Traceback" not in text + result.stdout and "Usage:" not in text, text
    assert text.count("\n") == 0 and text.startswith("error ("), text
    return text


def commands(group: click.Group = main, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def bad_values(command: click.Command) -> Iterator[list[str]]:
    """For each option taking a value: a value of the wrong kind."""
    for param in command.params:
        if not isinstance(param, click.Option) or param.is_flag or param.name in ("help",):
            continue
        flag = max(param.opts, key=len)
        kind = param.type
        if isinstance(kind, click.Choice):
            yield [flag, "no-such-choice"]
        elif isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)):
            yield [flag, "abc"]
            yield [flag, "-999999"]
        else:
            yield [flag, "bad'value\nwith a newline"]
            yield [flag, ""]


def arguments(command: click.Command) -> list[str]:
    return ["x" for p in command.params if isinstance(p, click.Argument) and p.required]


WALK = [(path, args) for path, command in commands() if path != ("db", "stop")
        for args in [["--no-such-option"], *bad_values(command)]]


@pytest.mark.parametrize(("path", "args"), WALK, ids=[" ".join((*p, *a)).replace("\n", "\\n") for p, a in WALK])
def test_every_command_with_malformed_values(cli_env: dict[str, str], path: tuple[str, ...], args: list[str],
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # an option naming an output file writes it here, not into the working tree
    result = invoke([*path, *args, *arguments(dict(commands())[path])], cli_env)
    assert result.exit_code in CODES
    if result.exit_code != 0:
        one_line_error(result)
    if args == ["--no-such-option"] or args[-1] in ("abc", "no-such-choice"):
        assert result.exit_code == 2


@pytest.mark.parametrize(("args", "env", "code", "says"), [
    (["search", "x", "--filter", "effective_from=notadate"], {}, 2, "ISO 8601"),
    (["search", "x", "--filter", '{"effective_to": 20240101}'], {}, 2, "ISO 8601"),
    (["search", "x", "--filter", '{"effective_from": "yesterday"}'], {}, 2, "ISO 8601"),
    (["search", "x", "--filter", "[" * 20000], {}, 2, "expected key=value"),
    (["search", "x", "--filter", "{" + '"metadata": {"a": ' + "[" * 20000], {}, 2, "nested too deeply"),
    (["ingest", "README.md", "-c", "big"], {"RAGD_EMBEDDER": "hash:20000"}, 2, "2000"),
    (["search", "x"], {"RAGD_DATABASE_URL": "notaurl"}, 3, "not valid"),
    (["search", "x"], {"RAGD_HNSW_EF_SEARCH": "abc"}, 2, "RAGD_HNSW_EF_SEARCH"),
    (["search", "x"], {"RAGD_NEAR_DUPLICATE_THRESHOLD": "7"}, 2, "RAGD_NEAR_DUPLICATE_THRESHOLD"),
    (["search", "x"], {"RAGD_EXTRACT_TIMEOUT_S": "-1"}, 2, "RAGD_EXTRACT_TIMEOUT_S"),
    (["search", "x", "-c", "no'such"], {}, 2, "invalid collection name"),
    (["search", "x", "--tenant", ""], {}, 2, "invalid tenant"),
    (["search", "x", "--tenant", "acme\n"], {}, 2, "invalid tenant"),
    (["eval", "x", "--plans", ","], {}, 2, "names no plan"),
    (["search", "x", "--k", "0"], {}, 2, "--k"),
    (["search"], {}, 2, "Missing argument"),
])
def test_known_bad_inputs(cli_env: dict[str, str], args: list[str], env: dict[str, str], code: int,
                          says: str) -> None:
    result = invoke(args, cli_env, env)
    assert result.exit_code == code, result.stderr
    assert says in one_line_error(result)


def test_usage_errors_from_the_installed_command(cli_env: dict[str, str]) -> None:
    result = run_cli(["search", "x", "--k", "abc"], cli_env)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error (bad_request): Invalid value for '--k'")
    assert result.stderr.strip().count("\n") == 0 and "Usage:" not in result.stderr


def test_every_ragd_setting_is_checked_at_start(cli_env: dict[str, str]) -> None:
    bad = run_cli(["collections", "list"], {**cli_env, "RAGD_OCR": "bogus"})
    assert bad.returncode == 2 and "RAGD_OCR='bogus'" in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
    typo = run_cli(["collections", "list"], {**cli_env, "RAGD_EMBEDER": "hash"})
    assert typo.returncode == 0 and "RAGD_EMBEDER is not a ragd setting" in typo.stderr
    assert "did you mean RAGD_EMBEDDER?" in typo.stderr
    assert run_cli(["collections", "list"], {**cli_env, "RAGD_OCR": "RapidOCR"}).returncode == 0
