"""bench/pipeline_archive.py builds its store column by column by name: it must make a store
the pipeline reads, and fail loudly (naming the columns) when a migration changes a table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.pipeline_archive import SchemaDrift, _insert, _journal_copy, build_store
from pipeline.store import Store, store_url


def test_the_bench_store_is_what_the_pipeline_reads(tmp_path: Path) -> None:
    path = tmp_path / "bench.db"
    build_store(path, 10)
    opened = Store(store_url(f"sqlite:///{path}"))
    try:
        assert opened.export_to_parquet("location = 'journal'", [], tmp_path / "out.parquet") == 10
    finally:
        opened.close()


def test_a_changed_table_stops_the_bench_with_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "bench.db"
    build_store(path, 1)
    connection = sqlite3.connect(path)
    connection.execute("ALTER TABLE messages ADD COLUMN priority_class INTEGER")
    with pytest.raises(SchemaDrift, match="columns to add to the bench: \\['priority_class'\\]"):
        _insert(connection, "messages", [_journal_copy(2, "guid", b"x")])
    connection.close()
