"""Each job end to end on a store seeded through the queue manager, on SQLite and PostgreSQL:
crashed at each step and re-run, re-run once complete, bad input refused before any change."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipeline.cli import main
from pipeline.progress import ARCHIVE_STEPS
from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import QueueSettings
from storage.store import SqlStore
from tests.gateway_process import GatewayProcess
from tests.pipeline.conftest import Sql
from tests.pipeline.seed import BILLING, CUTOFF, ORDERS, History, seed_history

pytestmark = [pytest.mark.spark, pytest.mark.anyio]
OLD_COPIES = (
    "SELECT count(*) FROM message_export_v1 WHERE location IN ('journal', 'deadletter', 'deadxact') "
    "AND stored_time < 1780272000000000"
)
"""Journal and dead-letter rows stored before CUTOFF (2026-06-01T00:00:00Z, in microseconds)."""
BUSY = "private$/busy"


def _archive(database_url: str, archive: Path, *extra: str) -> int:
    return main(
        ["archive", "--store", database_url, "--archive", str(archive), "--cutoff", CUTOFF, "--quiet", *extra]
    )


def _archived_ids(spark: SparkSession, archive: Path) -> list[int]:
    return sorted(row["lookup_id"] for row in spark.read.parquet(str(archive)).select("lookup_id").collect())


async def test_archive_report_redrive(
    manager: QueueManager,
    clock: SettableClock,
    database_url: str,
    sql: Sql,
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    history = await seed_history(manager, clock)
    old_ids = [row[0] for row in sql.rows(OLD_COPIES.replace("count(*)", "lookup_id"))]
    assert len(old_ids) == history.archivable
    archive = tmp_path / "archive"
    # Every step on SQLite; on PostgreSQL (slower to set up) the crash inside the delete.
    steps = ARCHIVE_STEPS if sql.dialect == "sqlite" else ("delete",)
    _archive_crashing_at(steps, database_url, archive, sql, old_ids)
    assert _archive(database_url, archive) == 0
    assert sql.value(OLD_COPIES) == 0
    assert _archived_ids(spark, archive) == sorted(old_ids)  # each exactly once
    assert sql.totals_agree()
    assert sql.rows("SELECT status, row_count FROM archive_runs") == [("deleted", history.archivable)]
    _times_are_utc_micros(spark, archive)
    capsys.readouterr()
    assert _archive(database_url, archive) == 0  # complete: a no-op that says where the rows are
    assert f"nothing to do ({history.archivable} rows archived to {archive})" in capsys.readouterr().out
    assert _archived_ids(spark, archive) == sorted(old_ids)
    _report(database_url, archive, tmp_path / "report", history)
    await _redrive(manager, database_url, archive, tmp_path / "manifest", sql, history)


def _archive_crashing_at(
    steps: tuple[str, ...], database_url: str, archive: Path, sql: Sql, old_ids: list[int]
) -> None:
    """Each attempt crashes one step later than the one before; none loses or deletes a row."""
    for step in steps:
        assert _archive(database_url, archive, "--fail-after", step) == 3, step
        assert sql.value(OLD_COPIES) == len(old_ids), step
        assert sql.totals_agree(), step
    assert sql.rows("SELECT status FROM archive_runs") == [("written",)]


def _times_are_utc_micros(spark: SparkSession, archive: Path) -> None:
    """Archive times are INT64 microseconds marked UTC-adjusted: aware UTC in pyarrow,
    pandas and Spark (not INT96, which carries no zone)."""
    part = next(archive.glob("queue=*/dt=*/run_id=*/*.parquet"))
    column = pq.ParquetFile(part).schema.column(pq.read_schema(part).get_field_index("stored_time"))
    assert column.physical_type == "INT64"
    assert json.loads(column.logical_type.to_json()) == {
        "Type": "Timestamp",
        "isAdjustedToUTC": True,
        "timeUnit": "microseconds",
        "is_from_converted_type": False,
        "force_set_converted_type": False,
    }
    assert pq.read_schema(part).field("stored_time").type == pa.timestamp("us", tz="UTC")
    assert str(pq.read_table(part).to_pandas()["stored_time"].dt.tz) == "UTC"  # pandas
    read_back = spark.read.parquet(str(part)).schema["stored_time"].dataType
    assert read_back.simpleString() == "timestamp"  # Spark's instant type (not timestamp_ntz)


def _report(database_url: str, archive: Path, out: Path, history: History) -> None:
    arguments = ["report", "--store", database_url, "--archive", str(archive), "--out", str(out), "--quiet"]
    assert main(arguments) == 0
    report = json.loads((out / "report.json").read_text())
    january = {row["queue"]: row for row in report["daily"] if row["day"] == "2026-01-01"}
    per_queue = history.dead_letters // 2
    assert january["private$\\orders"] == {
        "queue": "private$\\orders",
        "day": "2026-01-01",
        "arrivals": 2 * per_queue,
        "receives": per_queue - 1,
        "expiries": per_queue,
        "dead_letters": per_queue,
    }
    summary = report["summary"]
    assert summary["totals"]["dead_letters"] == history.dead_letters
    assert summary["totals"]["receives"] == history.journaled_old + history.journaled_recent
    assert (summary["archived_rows"], summary["resolution"]) == (history.archivable, "day")
    assert report["warnings"] == []
    assert [run["status"] for run in report["archive_runs"]] == ["deleted"]
    labels = {row["value"]: row["dead_letters"] for row in report["top_dead_letter_labels"]}
    assert labels == {"private$/orders expiring #": per_queue, "private$/billing expiring #": per_queue}
    classes = {(row["class_name"], row["class_hex"]) for row in report["dead_letters_by_class"]}
    assert classes == {("NACK_RECEIVE_TIMEOUT", "0xC002")}
    page = (out / "report.html").read_text()
    assert "<svg" in page and "private$\\orders" in page and "No warnings" in page
    assert "<script" not in page and "src=" not in page and "href=" not in page  # opens offline
    assert (out / "daily.parquet").is_file()
    assert not (out / "_staging").exists()  # the live export (every body) is not left behind


async def _redrive(
    manager: QueueManager, database_url: str, archive: Path, manifest: Path, sql: Sql, history: History
) -> None:
    """Archived dead letters of private$\\orders staged, then re-sent by the gateway's queue
    manager, once, whatever happens."""
    arguments = ["redrive", "--store", database_url, "--archive", str(archive), "--manifest", str(manifest)]
    arguments += ["--class", "NACK_RECEIVE_TIMEOUT", "--queue", "private$/orders", "--quiet", "--execute"]
    before = sql.value("SELECT message_count FROM queues WHERE path_key = 'private$\\orders'")
    assert main([*arguments, "--fail-after", "stage"]) == 3  # crashed while staging: nothing left
    assert sql.value("SELECT count(*) FROM redrive_staging") == 0
    assert sql.value("SELECT count(*) FROM redrive_batches") == 0
    assert main([*arguments, "--time-to-be-received", "3600"]) == 0
    assert sql.rows("SELECT status FROM redrive_batches") == [("staged",)]  # the pipeline sends nothing
    assert not (manifest / "_staging").exists()
    await _let_go(manager)
    assert await manager.redrives.apply_pending() == 1
    per_queue = history.dead_letters // 2
    labels = sql.rows(
        "SELECT m.label, m.message_class, m.ttbr_seconds, m.journal "
        "FROM messages m JOIN queues q ON q.id = m.queue_id "
        "WHERE q.path_key = 'private$\\orders' AND m.label LIKE '%expiring%' ORDER BY m.label"
    )
    # new messages: class NORMAL, the new TTBR, MQMSG_DEADLETTER asked for again
    assert labels == [(f"private$/orders expiring #{number}", 0, 3600, 1) for number in range(per_queue)]
    assert (
        sql.value("SELECT message_count FROM queues WHERE path_key = 'private$\\orders'")
        == before + per_queue
    )
    assert main(arguments) == 0  # everything already redriven: nothing staged, nothing moves twice
    assert await manager.redrives.apply_pending() == 0
    assert sql.value("SELECT count(*) FROM redrive_ledger") == per_queue
    assert sql.value("SELECT count(*) FROM redrive_staging") == 0
    assert sql.totals_agree()


async def test_redrive_while_the_gateway_sends(
    manager: QueueManager,
    clock: SettableClock,
    database_url: str,
    sql: Sql,
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Live dead letters staged by the pipeline and re-sent by a gateway process (asked with
    --gateway) while that gateway takes sends all the time: no `database is locked` on
    SQLite, every send and every dead letter accounted for."""
    history = await seed_history(manager, clock)
    await manager.create_queue(BUSY, QueueSettings())
    await _let_go(manager)
    gateway = GatewayProcess(database_url, {"MSMQGW_REDRIVE_INTERVAL_S": "3600"}, tmp_path / "gateway.log")
    try:
        gateway.wait_ready()
        stop = asyncio.Event()

        async def keep_sending() -> int:
            sent = 0
            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60) as client:
                while not stop.is_set():
                    answer = await client.post(f"/api/queues/{BUSY}/messages", json={"body": f"busy {sent}"})
                    assert answer.status_code == 201, answer.text
                    sent += 1
            return sent

        sender = asyncio.create_task(keep_sending())
        arguments = ["redrive", "--store", database_url, "--manifest", str(tmp_path / "manifest")]
        arguments += ["--class", "NACK_RECEIVE_TIMEOUT", "--execute", "--gateway", gateway.base_url]
        status = await anyio.to_thread.run_sync(main, arguments)
        stop.set()
        sent = await sender
        output = capsys.readouterr()
        assert "database is locked" not in output.err + gateway.log_text()
        assert status == 0, output.err
        assert f"{history.dead_letters} re-sent" in output.out
        assert (
            sent > 0
            and sql.value("SELECT message_count FROM queues WHERE path_key = 'private$\\busy'") == sent
        )
        assert sql.value("SELECT count(*) FROM redrive_ledger") == history.dead_letters
        assert sql.value("SELECT count(*) FROM message_export_v1 WHERE location = 'deadletter'") == 0
        assert sql.value("SELECT count(*) FROM redrive_staging") == 0
        assert sql.totals_agree()
    finally:
        gateway.stop()


async def _let_go(manager: QueueManager) -> None:
    """Close the test's own connections before the pipeline opens the SQLite file: two copies
    of SQLite in one process (the pipeline's ADBC driver bundles one) cannot see each other's
    POSIX locks, so each may take itself for the last user of the WAL and remove it. Separate
    processes (the gateway and the pipeline in production) are not affected."""
    store = manager.store
    assert isinstance(store, SqlStore)
    await store.engine.dispose()


@pytest.mark.parametrize("crashed_after", ["write", "verify"])
async def test_a_crashed_night_is_finished_or_rolled_back_by_the_next(
    crashed_after: str,
    manager: QueueManager,
    clock: SettableClock,
    database_url: str,
    sql: Sql,
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nightly runs are named by their cutoff, so the night after a crash is another run: it
    must finish (verified) or roll back (only written) the crashed one before its own, and
    every row ends in the archive exactly once."""
    history = await seed_history(manager, clock)
    old_ids = sorted(row[0] for row in sql.rows(OLD_COPIES.replace("count(*)", "lookup_id")))
    archive = tmp_path / "archive"
    night = ["archive", "--store", database_url, "--archive", str(archive), "--quiet"]
    assert main([*night, "--older-than-days", "31", "--fail-after", crashed_after]) == 3
    capsys.readouterr()
    assert main([*night[:-1], "--older-than-days", "30"]) == 0  # not quiet: its progress lines
    progress = capsys.readouterr().err
    if crashed_after == "write":
        assert "settle: rolled back crashed run archive-" in progress
        assert f"write: {history.archivable} rows to {archive}" in progress
    else:
        assert "settle: finished crashed run archive-" in progress
    assert _archived_ids(spark, archive) == old_ids  # each exactly once
    assert sql.value(OLD_COPIES) == 0
    assert sql.totals_agree()
    runs = dict(sql.rows("SELECT status, count(*) FROM archive_runs GROUP BY status"))
    assert runs == ({"deleted": 2} if crashed_after == "verify" else {"abandoned": 1, "deleted": 1})
    archived = sql.value("SELECT sum(row_count) FROM archive_runs WHERE status = 'deleted'")
    assert archived == history.archivable


async def test_redrive_without_to_names_every_missing_queue_first(
    manager: QueueManager,
    clock: SettableClock,
    database_url: str,
    sql: Sql,
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await seed_history(manager, clock)
    for path in (ORDERS, BILLING):
        await manager.delete_queue(path)
    await _let_go(manager)
    manifest = tmp_path / "manifest"
    arguments = ["redrive", "--store", database_url, "--manifest", str(manifest), "--quiet"]
    assert (
        main([*arguments, "--class", "NACK_Q_DELETED", "--class", "NACK_RECEIVE_TIMEOUT", "--execute"]) == 2
    )
    error = capsys.readouterr().err
    assert "2 targets do not exist: 'private$\\billing', 'private$\\orders'" in error
    assert "--to" in error
    assert not (manifest / "manifest").exists()  # nothing written, nothing staged
    assert sql.value("SELECT count(*) FROM redrive_batches") == 0


def test_quiet_means_nothing_on_stderr(database_url: str, tmp_path: Path) -> None:
    """A fresh process, as cron runs it: the JVM's banner and log4j lines are silenced too."""
    out = tmp_path / "report"
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "report",
        "--store",
        database_url,
        "--out",
        str(out),
        "--quiet",
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert (finished.returncode, finished.stderr) == (0, "")
    assert finished.stdout.startswith("report: ")
    assert not (out / "_staging").exists()
