"""The `msmq-gateway` command on a SQLite file of its own: its commands run in the test process
(tests/cli_in_process.py), and the installed script as a real process proves the entry point."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from storage.schema import metadata
from tests.cli_in_process import CliRun, run_cli
from tests.integration.support import gateway_command

COMMAND_TIMEOUT_S = 60


class Cli:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.database = directory / "cli.db"
        self.database_url = f"sqlite+aiosqlite:///{self.database}"

    def run(self, *arguments: str, stdin: bytes = b"") -> CliRun:
        return run_cli(self.database_url, *arguments, stdin=stdin, cwd=self.directory)

    def installed(self, *arguments: str) -> subprocess.CompletedProcess[bytes]:
        """The installed `msmq-gateway` script as a process of its own."""
        environment = {name: value for name, value in os.environ.items() if not name.startswith("MSMQGW_")}
        environment["MSMQGW_DATABASE_URL"] = self.database_url
        return subprocess.run(
            [*gateway_command(), *arguments],
            capture_output=True,
            cwd=self.directory,
            env=environment,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )

    def ok(self, *arguments: str, stdin: bytes = b"") -> Any:
        """Run a command that must succeed; return its JSON output."""
        result = self.run(*arguments, stdin=stdin)
        assert result.returncode == 0, (arguments, result.stderr.decode())
        return json.loads(result.stdout)

    def fails(self, mq_error: str, *arguments: str) -> None:
        """Run a command that must fail with exit status 2 and this MQ_ERROR on stderr."""
        result = self.run(*arguments)
        assert result.returncode == 2, (arguments, result.stdout.decode(), result.stderr.decode())
        assert result.stdout == b""
        error = json.loads(result.stderr)
        assert error["mq_error"] == mq_error and error["mq_error_code"].startswith("0xC00E")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_migrate_creates_the_schema(cli: Cli) -> None:
    result = cli.installed("migrate")
    assert result.returncode == 0, result.stderr.decode()
    assert str(cli.database) in result.stdout.decode()
    with sqlite3.connect(cli.database) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(metadata.tables) | {"alembic_version"}


def test_queue_create_list_show_purge_delete(cli: Cli) -> None:
    created = cli.ok("queue", "create", "private$/orders", "--label", "Orders", "--journal")
    assert (created["path"], created["label"], created["journal"], created["transactional"]) == (
        "private$/orders",
        "Orders",
        True,
        False,
    )
    cli.fails("MQ_ERROR_QUEUE_EXISTS", "queue", "create", "PRIVATE$\\Orders")
    cli.ok("send", "private$/orders", "one")
    shown = cli.ok("queue", "show", "private$\\orders")
    assert (shown["message_count"], shown["byte_count"]) == (1, 3)
    assert cli.ok("queue", "purge", "private$/orders") == {"purged": 1}
    cli.ok("send", "private$/orders", "two")
    assert cli.ok("queue", "delete", "private$/orders") == {
        "deleted": "private$/orders",
        "messages_dropped": 1,
    }
    cli.fails("MQ_ERROR_QUEUE_NOT_FOUND", "queue", "show", "private$/orders")
    listed = {queue["path"] for queue in cli.ok("queue", "list")}
    assert {"system$;deadletter", "system$;deadxact", "system$;journal"} <= listed
    assert "private$/orders" not in listed and "private$/orders;journal" not in listed


def test_send_peek_receive(cli: Cli) -> None:
    cli.ok("queue", "create", "private$/orders")
    piped = cli.ok("send", "private$/orders", "-", stdin=b"from stdin \xe2\x9c\x93")
    urgent = cli.ok("send", "private$/orders", "urgent", "--priority", "6", "--label", "hurry")
    assert all(sent["lookup_id"].isdigit() and sent["message_id"] for sent in (piped, urgent))
    peeked = cli.ok("peek", "private$/orders")
    assert (peeked["body"], peeked["label"], peeked["priority"]) == ("urgent", "hurry", 6)
    assert peeked["message_id"] == urgent["message_id"]
    received = [cli.ok("receive", "private$/orders") for _ in range(2)]
    assert [message["body"] for message in received] == ["urgent", "from stdin ✓"]
    assert received[1]["lookup_id"] == piped["lookup_id"]
    for command in ("receive", "peek"):
        empty = cli.run(command, "private$/orders")
        assert (empty.returncode, empty.stdout) == (1, b""), empty.stderr.decode()


def test_refusals_exit_2_with_the_mq_error_on_stderr(cli: Cli) -> None:
    cli.ok("queue", "create", "private$/payments", "--transactional")
    cli.fails("MQ_ERROR_ILLEGAL_QUEUE_PATHNAME", "queue", "create", "private$/a;b")
    cli.fails("MQ_ERROR_TRANSACTION_USAGE", "send", "private$/payments", "no transaction")
    cli.fails(
        "MQ_ERROR_ILLEGAL_PROPERTY_VALUE",
        "send",
        "private$/payments",
        "x",
        "--priority",
        "9",
        "--transaction",
        "single",
    )
    cli.fails("MQ_ERROR_QUEUE_NOT_FOUND", "receive", "private$/missing")
    assert cli.ok("send", "private$/payments", "pay", "--transaction", "single")["lookup_id"].isdigit()
    assert cli.ok("receive", "private$/payments")["body"] == "pay"


def test_a_usage_error_exits_2_with_help(cli: Cli) -> None:
    result = cli.run("queue", "frobnicate")
    assert result.returncode == 2
    assert b"usage: msmq-gateway" in result.stderr


def test_keys_and_grants(cli: Cli) -> None:
    created = cli.ok("keys", "create", "--principal", "ops", "--admin", "--description", "operators")
    assert created["key"].startswith(f"mgw_{created['key_id']}_") and created["principal"] == "ops"
    listed = cli.ok("keys", "list")
    assert [(key["key_id"], key["principal"], key["revoked_at"]) for key in listed] == [
        (created["key_id"], "ops", None)
    ]
    assert "key" not in listed[0]
    granted = cli.ok("grant", "app", "RECEIVE_MESSAGE,write_message", "--queue", "private$/orders")
    assert granted == {
        "principal": "app",
        "queue": "private$/orders",
        "rights": ["DELETE_MESSAGE", "PEEK_MESSAGE", "WRITE_MESSAGE"],
        "mask": 7,
    }
    assert cli.ok("grant", "app", "DELETE_MESSAGE", "--queue", "private$/orders", "--revoke")["mask"] == 6
    assert {(grant["principal"], grant["queue"]) for grant in cli.ok("grants")} == {
        ("ops", None),
        ("ops", "*"),
        ("app", "private$/orders"),
    }
    cli.fails("MQ_ERROR_INVALID_PARAMETER", "grant", "app", "SEND", "--queue", "private$/orders")
    assert cli.ok("keys", "revoke", created["key_id"]) == {"revoked": created["key_id"]}
    cli.fails("MQ_ERROR_INVALID_HANDLE", "keys", "revoke", created["key_id"])
    assert cli.ok("keys", "list", "--principal", "ops")[0]["revoked_at"] is not None


def test_serve_refuses_a_network_address_while_anonymous_callers_administer(cli: Cli) -> None:
    result = cli.installed("serve", "--host", "0.0.0.0", "--no-migrate")
    assert result.returncode == 3
    assert b"refusing to listen on 0.0.0.0" in result.stderr
    assert b"MSMQGW_ANONYMOUS_ADMIN=false" in result.stderr


def test_a_queue_no_path_can_name_is_listed_and_deleted_by_id(cli: Cli) -> None:
    """A name with `=` (created by an older gateway) is read as a format name wherever a queue
    is named: only `queue unreachable` finds and removes it."""
    cli.ok("queue", "create", "private$/fine")
    with sqlite3.connect(cli.database) as connection:
        connection.execute(
            "INSERT INTO queues (id, path_key, kind, name, label, transactional, quota_kb, journal,"
            " journal_quota_kb, base_priority, created_at, modified_at, message_count, byte_count)"
            " VALUES (900, 'direct=x', 'public', 'DIRECT=x', '', 0, 4294967295, 0, 4294967295, 0, 0, 0, 0, 0)"
        )
    assert cli.ok("queue", "unreachable") == [
        {"id": 900, "name": "DIRECT=x", "kind": "public", "messages": 0}
    ]
    assert cli.ok("queue", "unreachable", "--delete", "900") == {"deleted": 900, "messages_dropped": 0}
    assert cli.ok("queue", "unreachable") == []
    cli.fails("MQ_ERROR_QUEUE_NOT_FOUND", "queue", "unreachable", "--delete", "900")
    cli.fails("MQ_ERROR_ILLEGAL_QUEUE_PATHNAME", "queue", "create", "DIRECT=x")
    assert [queue["path"] for queue in cli.ok("queue", "list") if queue["kind"] == "private"] == [
        "private$/fine",
        "private$/fine;journal",
    ]


def test_queue_permissions_and_owner(cli: Cli) -> None:
    cli.ok("queue", "create", "private$/orders")
    cli.ok("grant", "app", "RECEIVE_MESSAGE", "--queue", "PRIVATE$/Orders")
    cli.ok("grant", "auditor", "PEEK_MESSAGE", "--queue", "private$/*")
    cli.ok("grant", "ops", "GENERIC_ALL", "--queue", "private$/orders*", "--exact")
    shown = cli.ok("queue", "permissions", "private$\\ORDERS")
    assert shown == {
        "queue": "private$/orders",
        "owner": None,  # created on the store: nobody's
        "owner_rights": ["GET_PERMISSIONS", "CHANGE_PERMISSIONS"],
        "grants": [
            {
                "principal": "app",
                "queue": "PRIVATE$/Orders",
                "own": True,
                "rights": ["DELETE_MESSAGE", "PEEK_MESSAGE"],
            },
            {"principal": "auditor", "queue": "private$/*", "own": False, "rights": ["PEEK_MESSAGE"]},
        ],
    }
    assert cli.ok("queue", "owner", "private$/orders", "--principal", "app") == {
        "queue": "private$/orders",
        "owner": "app",
    }
    assert cli.ok("queue", "permissions", "private$/orders")["owner"] == "app"
    cli.fails("MQ_ERROR_QUEUE_NOT_FOUND", "queue", "owner", "private$/none", "--principal", "app")
    cli.fails("MQ_ERROR_ILLEGAL_QUEUE_PATHNAME", "queue", "permissions", "private$/orders;journal")
    cli.ok("queue", "delete", "private$/orders")
    cli.ok("queue", "create", "private$/orders")
    recreated = cli.ok("queue", "permissions", "private$/orders")
    assert (recreated["owner"], [grant["principal"] for grant in recreated["grants"]]) == (None, ["auditor"])
