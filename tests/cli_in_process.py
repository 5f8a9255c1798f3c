"""`msmq-gateway ARGUMENTS` run by `app.cli.main` in the test process: its exit status and the
bytes it wrote to stdout and stderr, as a subprocess would give them, for about a hundredth of
the cost (a process per command spent about a second importing the gateway).

What only a real process shows (the installed script, its entry point) stays tested with
processes in tests/integration/test_cli.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.cli import main

_PREFIX = "MSMQGW_"
_ONE_AT_A_TIME = threading.Lock()
"""The environment, the working directory and sys's streams are the process's: one command at
a time (tests run a command in a thread while their app serves in the event loop)."""


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stdout: bytes
    stderr: bytes


def run_cli(database_url: str, *arguments: str, stdin: bytes = b"", cwd: Path | None = None) -> CliRun:
    """Run one command on `database_url`, with no other MSMQGW_* setting in the environment."""
    with _ONE_AT_A_TIME, _settings(database_url), _directory(cwd), _streams(stdin) as (out, err):
        try:
            returncode = main(list(arguments))
        except SystemExit as exit_:  # argparse's usage errors and --help
            returncode = exit_.code if isinstance(exit_.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        return CliRun(returncode, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _settings(database_url: str) -> Iterator[None]:
    saved = {name: value for name, value in os.environ.items() if name.startswith(_PREFIX)}
    for name in saved:
        del os.environ[name]
    os.environ[f"{_PREFIX}DATABASE_URL"] = database_url
    try:
        yield
    finally:
        del os.environ[f"{_PREFIX}DATABASE_URL"]
        os.environ.update(saved)


@contextlib.contextmanager
def _directory(cwd: Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    with contextlib.chdir(cwd):
        yield


@contextlib.contextmanager
def _streams(stdin: bytes) -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """sys.stdin reading `stdin`; sys.stdout and sys.stderr writing bytes (text and .buffer
    alike, in the order written), as UTF-8 like the process's streams."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
