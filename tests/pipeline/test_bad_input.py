"""Bad input and unusable stores or directories: a clear error, exit status 2, nothing changed.
These fail before any Spark work."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main
from tests.pipeline.conftest import Sql

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/msmq"


def _nothing_changed(sql: Sql) -> bool:
    runs = sql.value("SELECT count(*) FROM archive_runs")
    staged = sql.value("SELECT count(*) FROM redrive_staging")
    batches = sql.value("SELECT count(*) FROM redrive_batches")
    return bool(runs == 0 and staged == 0 and batches == 0)


@pytest.mark.parametrize(
    "arguments",
    [
        ["archive", "--cutoff", "2099-01-01"],
        ["archive", "--older-than-days", "-1"],
        ["redrive", "--to", "private$/nowhere", "--execute"],
        ["redrive", "--to", "system$;deadletter", "--execute"],
        ["redrive", "--queue", "private$/nowhere"],
        ["redrive", "--class", "NACK_NONSENSE"],
        ["redrive", "--label", "(unclosed"],
        ["redrive", "--execute", "--gateway", "file:///etc/passwd"],
    ],
    ids=[
        "future-cutoff",
        "negative-days",
        "unknown-target",
        "system-target",
        "unknown-queue",
        "class",
        "label",
        "gateway-url",
    ],
)
def test_bad_arguments_are_refused_before_any_change(
    arguments: list[str], database_url: str, sql: Sql, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    place = ["--archive", str(tmp_path / "archive")] if arguments[0] == "archive" else []
    place += ["--manifest", str(tmp_path / "manifest")] if arguments[0] == "redrive" else []
    assert main([*arguments, "--store", database_url, *place]) == 2
    assert capsys.readouterr().err.startswith(f"msmq-gateway pipeline {arguments[0]}: error: ")
    assert _nothing_changed(sql)


def test_an_archive_directory_that_cannot_be_written_is_refused(
    database_url: str, sql: Sql, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert main(["archive", "--store", database_url, "--archive", str(blocker / "archive")]) == 2
    assert "is not a writable directory" in capsys.readouterr().err
    assert _nothing_changed(sql)


@pytest.mark.parametrize("store", [UNREACHABLE, "sqlite:///nowhere/msmq.db", "mysql://host/db"])
def test_a_store_that_cannot_be_used_is_a_clear_error(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--store", store, "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("msmq-gateway pipeline report: error: ") and "store" in error


def test_a_second_archive_job_on_the_same_archive_is_refused(
    database_url: str, sql: Sql, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job still running must not be taken for a crashed one (whose run the next would
    roll back): one archive job at a time per archive directory."""
    import fcntl

    archive = tmp_path / "archive"
    archive.mkdir()
    with (archive / ".archive.lock").open("a") as running:
        fcntl.flock(running, fcntl.LOCK_EX)
        assert (
            main(["archive", "--store", database_url, "--archive", str(archive), "--cutoff", "2026-01-01"])
            == 2
        )
    assert "another archive job is running" in capsys.readouterr().err
    assert _nothing_changed(sql)
