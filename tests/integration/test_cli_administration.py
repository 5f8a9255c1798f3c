"""`msmq-gateway message delete|move|resend|export|import` (run in the test process, as
tests/integration/test_cli.py runs commands), on a SQLite file of its own (the operations
themselves are tested on both stores over REST)."""

from __future__ import annotations

import json

from tests.integration.test_cli import Cli, cli  # noqa: F401  (the fixture)

ORDERS = "private$/orders"
TARGET = "private$/target"


def test_delete_move_export_and_import_from_the_command_line(cli: Cli) -> None:  # noqa: F811
    cli.ok("queue", "create", ORDERS)
    cli.ok("queue", "create", TARGET)
    sent = [cli.ok("send", ORDERS, body)["lookup_id"] for body in ("a", "b", "c")]
    assert cli.run("message", "delete", ORDERS, sent[1]).returncode == 0
    cli.fails("MQ_ERROR_MESSAGE_NOT_FOUND", "message", "delete", ORDERS, sent[1])
    moved = cli.ok("message", "move", ORDERS, sent[2], "--to", TARGET)
    assert [item["lookup_id"] for item in moved["moved"]] == [sent[2]]
    exported = cli.run("message", "export", TARGET)
    assert exported.returncode == 0, exported.stderr.decode()
    lines = [json.loads(line) for line in exported.stdout.decode().splitlines()]
    assert [line["body_base64"] for line in lines] == ["Yw=="]
    (cli.directory / "target.jsonl").write_bytes(exported.stdout)
    assert cli.ok("message", "import", ORDERS, "target.jsonl") == {"queue": ORDERS, "imported": 1}
    assert cli.ok("message", "import", ORDERS, "-", stdin=exported.stdout)["imported"] == 1
    remaining = cli.run("message", "export", ORDERS).stdout.decode().splitlines()
    assert [json.loads(line)["body_base64"] for line in remaining] == ["YQ==", "Yw==", "Yw=="]
    cli.fails("MQ_ERROR_INVALID_PARAMETER", "message", "resend", ORDERS, "--all")
