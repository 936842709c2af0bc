"""``--help``: every command listed, every subcommand with examples; docs/cli.md documents them all."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from mme_triton.cli import main, parser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
REQUIRED = [
    "validate",
    "package",
    "upload",
    "list",
    "models",
    "remove",
    "deploy",
    "invoke",
    "status",
    "config",
    "export",
    "teardown",
    "sweep",
    "local",
    "quickstart",
    "plan-capacity",
]


def _commands(
    current: argparse.ArgumentParser | None = None, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command path and its parser, e.g. ``("models", "add")``."""
    found: list[tuple[tuple[str, ...], argparse.ArgumentParser]] = []
    for action in (current or parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(((*prefix, name), sub))
                found.extend(_commands(sub, (*prefix, name)))
    return found


COMMANDS = _commands()
LEAVES = [
    (path, p)
    for path, p in COMMANDS
    if not any(other[: len(path)] == path and other != path for other, _ in COMMANDS)
]


def test_cli_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    listed = re.findall(r"^    (\w[\w-]*)\s", capsys.readouterr().out, re.MULTILINE)
    assert [name for name in REQUIRED if name not in listed] == []


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_cli_subcommand_help_exits_zero(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main([*path, "--help"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: mme-triton {' '.join(path)}")


# the embedded stack's commands are registered by mme_triton.local.cli
WITH_EXAMPLES = [path for path, _ in COMMANDS if path[0] not in ("local", "quickstart")]


@pytest.mark.parametrize("path", WITH_EXAMPLES, ids=[" ".join(p) for p in WITH_EXAMPLES])
def test_cli_subcommand_help_shows_examples(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*path, "--help"])
    help_text = capsys.readouterr().out
    assert "examples:\n  mme-triton " in help_text


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_cli_docs_document_every_command(path: tuple[str, ...]) -> None:
    assert f"mme-triton {' '.join(path)}" in DOCS.read_text(), (
        f"docs/cli.md does not show `mme-triton {' '.join(path)}`"
    )


@pytest.mark.parametrize("path", [path for path, _ in LEAVES], ids=[" ".join(p) for p, _ in LEAVES])
def test_cli_docs_document_every_flag(path: tuple[str, ...]) -> None:
    sub = dict(COMMANDS)[path]
    docs = DOCS.read_text()
    flags = {
        option
        for action in sub._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert sorted(flag for flag in flags if f"`{flag}" not in docs and f" {flag}" not in docs) == []
