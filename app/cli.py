"""`msmq-gateway`: serve, migrate, and queue/message commands that work on the store directly."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from app import cli_access
from app.cli_messages import message_commands
from app.configs import manager_config
from app.message_schemas import MessageIn, MessageOut
from app.schemas import QueueCreate, QueueOut
from app.settings import Settings, load_settings
from app.trigger_schemas import InvocationOut, RuleOut, TriggerOut
from qm.access import AccessControl, AuditEntry, audit_text
from qm.clock import SystemClock
from qm.errors import MqError
from qm.manager import QueueManager
from qm.reading import QueueReader
from qm.triggers.actions import AllowList
from qm.triggers.admin import TriggerAdmin
from storage.engine import make_engine
from storage.migrate import upgrade
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps

Command = Callable[[QueueManager, QueueReader, argparse.Namespace], Awaitable[Any]]


EXIT_NO_MESSAGE = 1
EXIT_MQ_ERROR = 2
EXIT_FAILURE = 3


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 on success, 1 when receive/peek found no message, 2 on an MQ error, 3 otherwise."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["pipeline"]:
        return _pipeline(argv[1:])
    arguments = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except (ValueError, ValidationError) as error:
        print(f"msmq-gateway: configuration error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        return int(arguments.handler(settings, arguments) or 0)
    except MqError as error:
        detail = {"mq_error": error.code.name, "mq_error_code": error.code.hex, "detail": error.detail}
        print(json.dumps(detail), file=sys.stderr)
        return EXIT_MQ_ERROR
    except (OSError, SQLAlchemyError) as error:
        print(f"msmq-gateway: cannot use {settings.display_database_url()}: {error}", file=sys.stderr)
        return EXIT_FAILURE


def _pipeline(argv: list[str]) -> int:
    """`msmq-gateway pipeline <job> ...`: the Spark jobs, imported only when asked for, so the
    gateway itself runs without pyspark (the `pipeline` extra)."""
    try:
        from pipeline.cli import main as pipeline_main
    except ModuleNotFoundError as error:
        print(
            f"msmq-gateway pipeline: {error.name} is not installed; "
            "install the extra: pip install -e '.[pipeline]'",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return pipeline_main(argv)


def _serve(settings: Settings, arguments: argparse.Namespace) -> int:
    import uvicorn

    from app.auth import check_exposure
    from app.http_protocol import HttpLimits, OneWriteHttpToolsProtocol
    from app.main import create_app
    from app.metrics import worker_metrics

    # The gateway's own log lines (SRMP refusals, timer mismatches, expiries) at the same level.
    logging.basicConfig(level=arguments.log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
    if not arguments.no_migrate:
        upgrade(settings.database_url)
    host = arguments.host or settings.host
    port = arguments.port or settings.port
    settings = settings.model_copy(update={"host": host, "port": port})  # the receipts URL names the port
    try:
        check_exposure(settings)
    except RuntimeError as refused:
        print(f"msmq-gateway: {refused}", file=sys.stderr)
        return EXIT_FAILURE
    OneWriteHttpToolsProtocol.limits = HttpLimits.of(settings)  # workers read the environment
    tls = tls_options(settings)
    if arguments.workers > 1:
        # Each worker process builds its own app from the same MSMQGW_* environment; they share
        # the database (docs/performance.md: several workers).
        os.environ["MSMQGW_HOST"], os.environ["MSMQGW_PORT"] = host, str(port)
        with worker_metrics():  # the workers' counters, summed by every scrape (app/metrics.py)
            uvicorn.run(
                "app.main:create_app",
                factory=True,
                host=host,
                port=port,
                workers=arguments.workers,
                log_level=arguments.log_level,
                http=OneWriteHttpToolsProtocol,
                timeout_keep_alive=settings.http_keep_alive_s,
                **tls,
            )
        return 0
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        workers=1,
        log_level=arguments.log_level,
        http=OneWriteHttpToolsProtocol,
        timeout_keep_alive=settings.http_keep_alive_s,
        **tls,
    )
    return 0


def tls_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's TLS options: HTTPS when a certificate is configured, client certificates
    asked for (and checked against the client CAs) when those are configured."""
    if not settings.tls_cert_file:
        return {}
    import ssl

    options: dict[str, Any] = {"ssl_certfile": settings.tls_cert_file, "ssl_keyfile": settings.tls_key_file}
    if settings.tls_client_ca_file:
        options["ssl_ca_certs"] = settings.tls_client_ca_file
        required = settings.tls_client_cert == "required"
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
    return options


def _migrate(settings: Settings, _arguments: argparse.Namespace) -> int:
    upgrade(settings.database_url)
    print(f"migrated {settings.display_database_url()}")
    return 0


def _on_store(command: Command) -> Callable[[Settings, argparse.Namespace], int]:
    """Run one queue-manager command against the configured store, printing JSON."""

    def run(settings: Settings, arguments: argparse.Namespace) -> int:
        upgrade(settings.database_url)
        result = asyncio.run(_with_manager(settings, arguments, command))
        if result is not None:
            print(json.dumps(result, indent=2, default=str))
        return 0 if result is not None or not getattr(arguments, "expect_message", False) else EXIT_NO_MESSAGE

    return run


async def _with_manager(settings: Settings, arguments: argparse.Namespace, command: Command) -> Any:
    store = SqlStore(make_engine(settings.database_url, driver_sql=settings.driver_sql))
    try:
        manager = QueueManager(
            store, LocalWakeUps(settings.wake_poll_interval_s), SystemClock(), manager_config(settings)
        )
        await manager.start()
        result = await command(manager, QueueReader(manager), arguments)
        await _audited(store, manager, arguments, settings)
        return result
    finally:
        await store.close()


AUDITED_TARGETS = ("path", "to", "lookup_id", "delete")
"""The arguments that name what an audited command changed (`path=private$/orders`)."""


async def _audited(
    store: SqlStore, manager: QueueManager, arguments: argparse.Namespace, settings: Settings
) -> None:
    """A change made (its command set `audited`): recorded as principal `cli`, as REST records
    it; a queue deleted takes the grants on its path with it, as over REST."""
    action = getattr(arguments, "audited", None)
    if action is None or (action == "queue unreachable" and arguments.delete is None):
        return
    access = AccessControl(store.access, manager.clock, settings.auth_cache_ttl_s)
    if action == "queue delete":
        await access.queue_deleted(manager.resolve(arguments.path).url_path)
    found = [(name, getattr(arguments, name, None)) for name in AUDITED_TARGETS]
    target = " ".join(f"{name}={value}" for name, value in found if value is not None)
    target = audit_text(target)
    await store.access.record_audit(
        AuditEntry(manager.clock.now(), "cli", "local", f"cli {action}", target, "allowed")
    )


async def _queue_create(manager: QueueManager, _reader: QueueReader, arguments: argparse.Namespace) -> Any:
    body = QueueCreate(
        path=arguments.path,
        label=arguments.label,
        transactional=arguments.transactional,
        journal=arguments.journal,
    )
    return QueueOut.of(await manager.create_queue(body.path, body.settings())).model_dump(mode="json")


async def _queue_list(manager: QueueManager, _reader: QueueReader, _arguments: argparse.Namespace) -> Any:
    return [QueueOut.of(queue).model_dump(mode="json") for queue in await manager.list_queues()]


async def _queue_show(manager: QueueManager, _reader: QueueReader, arguments: argparse.Namespace) -> Any:
    return QueueOut.of(await manager.get_queue(arguments.path)).model_dump(mode="json")


async def _queue_delete(manager: QueueManager, _reader: QueueReader, arguments: argparse.Namespace) -> Any:
    return {"deleted": arguments.path, "messages_dropped": await manager.delete_queue(arguments.path)}


async def _queue_unreachable(
    manager: QueueManager, _reader: QueueReader, arguments: argparse.Namespace
) -> Any:
    """List, or with --delete ID remove, queues whose stored name no path can name any more."""
    if arguments.delete is not None:
        dropped = await manager.delete_unreachable_queue(arguments.delete)
        return {"deleted": arguments.delete, "messages_dropped": dropped}
    return [
        {
            "id": queue.id,
            "name": queue.path.name,
            "kind": queue.path.kind.value,
            "messages": queue.message_count,
        }
        for queue in await manager.unreachable_queues()
    ]


async def _queue_purge(manager: QueueManager, _reader: QueueReader, arguments: argparse.Namespace) -> Any:
    return {"purged": await manager.purge_queue(arguments.path)}


async def _send(manager: QueueManager, _reader: QueueReader, arguments: argparse.Namespace) -> Any:
    body = sys.stdin.buffer.read() if arguments.body == "-" else arguments.body.encode()
    properties = MessageIn(label=arguments.label, priority=arguments.priority).properties()
    properties = dataclasses.replace(properties, body=body)
    message = await manager.send(arguments.path, properties, arguments.transaction)
    return {"lookup_id": str(message.lookup_id), "message_id": message.message_id}


async def _receive(manager: QueueManager, reader: QueueReader, arguments: argparse.Namespace) -> Any:
    message = await reader.receive(arguments.path, arguments.timeout_ms)
    return None if message is None else MessageOut.of(message, arguments.path).model_dump(mode="json")


async def _peek(manager: QueueManager, reader: QueueReader, arguments: argparse.Namespace) -> Any:
    message = await reader.peek(arguments.path, arguments.timeout_ms)
    return None if message is None else MessageOut.of(message, arguments.path).model_dump(mode="json")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msmq-gateway",
        description="MSMQ-compatible queue gateway. Settings come from MSMQGW_* environment variables.",
    )
    commands = parser.add_subparsers(required=True, metavar="command")
    commands.add_parser(
        "pipeline", help="archive, report, redrive: Spark jobs (msmq-gateway pipeline --help)", add_help=False
    )
    serve = commands.add_parser("serve", help="migrate the database and serve the HTTP API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--no-migrate", action="store_true", help="do not run migrations first")
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--workers", type=int, default=1, help="worker processes sharing the database (default 1)"
    )
    serve.set_defaults(handler=_serve)
    commands.add_parser("migrate", help="create or upgrade the database schema").set_defaults(
        handler=_migrate
    )
    _queue_commands(
        commands.add_parser("queue", help="manage queues").add_subparsers(required=True, metavar="action")
    )
    _message_commands(commands)
    message_commands(commands, _on_store)
    _trigger_commands(commands)
    cli_access.add_commands(commands)
    return parser


def _queue_commands(actions: Any) -> None:
    create = actions.add_parser("create", help="create a queue")
    create.add_argument("path")
    create.add_argument("--label", default="")
    create.add_argument("--transactional", action="store_true")
    create.add_argument("--journal", action="store_true")
    create.set_defaults(handler=_on_store(_queue_create), audited="queue create")
    actions.add_parser("list", help="list queues").set_defaults(handler=_on_store(_queue_list))
    unreachable = actions.add_parser(
        "unreachable", help="list queues whose name no path can name (e.g. with '='), or delete one by ID"
    )
    unreachable.add_argument("--delete", type=int, metavar="ID", help="delete this one, with its messages")
    unreachable.set_defaults(handler=_on_store(_queue_unreachable), audited="queue unreachable")
    for name, command, text in (
        ("show", _queue_show, "show a queue"),
        ("delete", _queue_delete, "delete a queue and its messages"),
        ("purge", _queue_purge, "remove every available message"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("path")
        action.set_defaults(handler=_on_store(command), audited=None if name == "show" else f"queue {name}")
    cli_access.add_queue_commands(actions)


def _message_commands(commands: Any) -> None:
    send = commands.add_parser("send", help="send a message ('-' reads the body from stdin)")
    send.add_argument("path")
    send.add_argument("body")
    send.add_argument("--label", default="")
    send.add_argument("--priority", type=int, default=3)
    send.add_argument("--transaction", help="'single' for a transactional queue")
    send.set_defaults(handler=_on_store(_send))
    for name, command in (("receive", _receive), ("peek", _peek)):
        action = commands.add_parser(name, help=f"{name} the first message; exit 1 if none")
        action.add_argument("path")
        action.add_argument("--timeout-ms", type=int, default=0)
        action.set_defaults(handler=_on_store(command), expect_message=True)


async def _trigger_list(manager: QueueManager, _reader: QueueReader, _arguments: argparse.Namespace) -> Any:
    admin = TriggerAdmin(manager, manager.store.triggers, AllowList())
    names = {rule.id: rule.name for rule in await admin.rules()}
    return [TriggerOut.of(trigger, names).model_dump(mode="json") for trigger in await admin.triggers()]


async def _rule_list(manager: QueueManager, _reader: QueueReader, _arguments: argparse.Namespace) -> Any:
    return [RuleOut.of(rule).model_dump(mode="json") for rule in await manager.store.triggers.list_rules()]


async def _trigger_log(manager: QueueManager, _reader: QueueReader, arguments: argparse.Namespace) -> Any:
    admin = TriggerAdmin(manager, manager.store.triggers, AllowList())
    entries = await admin.invocations(arguments.trigger, arguments.after, arguments.limit)
    return [InvocationOut.of(entry).model_dump(mode="json") for entry in entries]


def _trigger_commands(commands: Any) -> None:
    """Read-only views; triggers and rules are defined over REST (/api/triggers, /api/rules)."""
    trigger = commands.add_parser("trigger", help="show triggers and their invocation logs")
    actions = trigger.add_subparsers(required=True, metavar="action")
    actions.add_parser("list", help="list triggers").set_defaults(handler=_on_store(_trigger_list))
    log = actions.add_parser("log", help="a trigger's invocation log")
    log.add_argument("trigger", help="ID or name")
    log.add_argument("--after", type=int, default=0)
    log.add_argument("--limit", type=int, default=100)
    log.set_defaults(handler=_on_store(_trigger_log))
    rule = commands.add_parser("rule", help="show rules").add_subparsers(required=True, metavar="action")
    rule.add_parser("list", help="list rules").set_defaults(handler=_on_store(_rule_list))


if __name__ == "__main__":
    sys.exit(main())
