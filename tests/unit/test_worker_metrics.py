"""`serve --workers N` keeps the workers' metrics in PROMETHEUS_MULTIPROC_DIR: a fresh directory
of its own, or the operator's emptied of an earlier run's files (which would be added in)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.metrics import MULTIPROCESS_DIRECTORY, worker_metrics


def test_without_a_directory_a_new_one_is_made_for_the_run_and_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MULTIPROCESS_DIRECTORY, raising=False)
    with worker_metrics() as directory:
        assert os.environ[MULTIPROCESS_DIRECTORY] == str(directory)
        assert directory.is_dir() and not any(directory.iterdir())
        (directory / "counter_123.db").write_bytes(b"x")
    assert not directory.exists()
    assert MULTIPROCESS_DIRECTORY not in os.environ


def test_the_operators_directory_is_emptied_of_an_earlier_runs_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    given = tmp_path / "metrics"
    given.mkdir()
    (given / "counter_41.db").write_bytes(b"stale")
    (given / "notes.txt").write_text("not ours")
    monkeypatch.setenv(MULTIPROCESS_DIRECTORY, str(given))
    with worker_metrics() as directory:
        assert directory == given
        assert sorted(path.name for path in directory.iterdir()) == ["notes.txt"]
    assert given.is_dir()
    assert os.environ[MULTIPROCESS_DIRECTORY] == str(given)
