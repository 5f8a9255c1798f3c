"""The gateway under test as a real `msmq-gateway serve` process, and the databases it runs on.

PostgreSQL gets a database of its own per run (created, then dropped); SQLite a file in a
temporary directory. Peak RSS is the kernel's high-water mark (VmHWM) of the process,
read just before it stops, so one process per scenario gives the peak of that scenario.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

POSTGRES_ADMIN = os.environ.get("MSMQGW_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
READY_ATTEMPTS = 2400
READY_INTERVAL_S = 0.05
"""Up to two minutes for a gateway to answer /healthz: `serve --workers 2` on a machine other
work keeps busy (load 15 on two cores) took longer than the 20 s allowed before."""


@dataclass(frozen=True)
class Database:
    kind: str
    """sqlite or postgresql"""
    url: str
    """The gateway's SQLAlchemy URL."""
    driver_target: str
    """What the plain driver connects to: a file path or a libpq URL."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listening(port: int) -> bool:
    """Whether a server answers on 127.0.0.1:`port` (the suite starts none of its peers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def postgres_up() -> bool:
    return listening(5432)


@contextmanager
def sqlite_database() -> Iterator[Database]:
    directory = Path(tempfile.mkdtemp(prefix="msmqgw-bench-"))
    path = directory / "bench.db"
    try:
        yield Database("sqlite", f"sqlite+aiosqlite:///{path}", str(path))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def postgres_database() -> Iterator[Database]:
    import psycopg

    name = f"msmqgw_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    target = POSTGRES_ADMIN.rsplit("/", 1)[0] + "/" + name
    try:
        yield Database("postgresql", target.replace("postgresql://", "postgresql+asyncpg://", 1), target)
    finally:
        with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def settle(database: Database) -> None:
    """Let the database settle before a scenario, so that none pays for the one before it: on
    PostgreSQL a VACUUM (ANALYZE) and a CHECKPOINT (the dead rows of a previous scenario's
    hundred thousand messages would otherwise bring autovacuum and a checkpoint into the
    middle of the next), on SQLite a WAL checkpoint."""
    if database.kind == "sqlite":
        import sqlite3

        with contextlib.closing(sqlite3.connect(database.driver_target)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return
    import psycopg

    with psycopg.connect(database.driver_target, autocommit=True) as connection:
        connection.execute("VACUUM (ANALYZE)")
        connection.execute("CHECKPOINT")


def gateway_executable() -> list[str]:
    script = Path(sys.executable).with_name("msmq-gateway")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def migrate(database: Database) -> None:
    environment = _environment(database, {})
    subprocess.run([*gateway_executable(), "migrate"], env=environment, check=True, capture_output=True)


def _environment(database: Database, settings: dict[str, str]) -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("MSMQGW_")}
    return environment | {"MSMQGW_DATABASE_URL": database.url, **_ab_settings(), **settings}


def _ab_settings() -> dict[str, str]:
    """MSMQGW_BENCH_SETTINGS, `NAME=value,NAME=value`: settings for every gateway of the run, for
    an A/B of one setting in the same session (e.g. MSMQGW_DRIVER_SQL=false)."""
    listed = os.environ.get("MSMQGW_BENCH_SETTINGS", "")
    pairs = (item.split("=", 1) for item in listed.split(",") if "=" in item)
    return {name.strip(): value.strip() for name, value in pairs}


class Gateway:
    """One `serve --no-migrate` process; `stop()` returns its peak RSS and CPU seconds."""

    def __init__(self, database: Database, settings: dict[str, str] | None = None, workers: int = 1) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = [
            *gateway_executable(),
            "serve",
            "--no-migrate",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            "--workers",
            str(workers),
        ]
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            command, env=_environment(database, settings or {}), stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_ready()
        self._ps = psutil.Process(self.process.pid)

    def _wait_ready(self) -> None:
        for _ in range(READY_ATTEMPTS):
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.base_url + "/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(READY_INTERVAL_S)
        self._log.seek(0)
        raise RuntimeError(f"the gateway did not start:\n{self._log.read().decode(errors='replace')}")

    def cpu_seconds(self) -> float:
        """CPU of the gateway and its worker processes (`--workers`), those alive now."""
        total = 0.0
        for process in [self._ps, *self._ps.children(recursive=True)]:
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def peak_rss_mb(self) -> float:
        """Peak RSS summed over the gateway's processes (each worker has its own)."""
        return sum(_peak_rss_mb(process.pid) for process in [self._ps, *self._ps.children(recursive=True)])

    def stop(self) -> tuple[float, float]:
        peak, cpu = self.peak_rss_mb(), self.cpu_seconds()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
        return peak, cpu


def client_cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


def _peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
