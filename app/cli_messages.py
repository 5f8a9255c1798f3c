"""`msmq-gateway message …`: an operator's work on chosen messages, on the store directly
(qm.administration; the same operations as /api/queues/{path}/messages/…)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_core import to_json

from app.admin_schemas import MovedOut, export_line, parse_import, parse_lookup_ids
from app.answer_bytes import answer_budget
from app.settings import load_settings
from qm.administration import Administration
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.reading import QueueReader

Command = Callable[[QueueManager, QueueReader, argparse.Namespace], Awaitable[Any]]
OnStore = Callable[[Command], Callable[..., int]]


async def _delete(manager: QueueManager, reader: QueueReader, arguments: argparse.Namespace) -> Any:
    [lookup_id] = parse_lookup_ids([arguments.lookup_id])
    message = await Administration(manager, reader).delete_message(arguments.path, lookup_id)
    return {"deleted": str(message.lookup_id), "message_id": message.message_id}


async def _move(manager: QueueManager, reader: QueueReader, arguments: argparse.Namespace) -> Any:
    chosen = parse_lookup_ids(arguments.lookup_ids)
    moved = await Administration(manager, reader).move_messages(arguments.path, chosen, arguments.to)
    to = manager.resolve(arguments.to).url_path
    return {"queue": to, "moved": [MovedOut.of(item, to).model_dump() for item in moved]}


async def _resend(manager: QueueManager, reader: QueueReader, arguments: argparse.Namespace) -> Any:
    if arguments.all == bool(arguments.lookup_ids):
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "give lookup IDs or --all, not both")
    chosen = None if arguments.all else parse_lookup_ids(arguments.lookup_ids)
    resent = await Administration(manager, reader).resend_dead_letters(arguments.path, chosen)
    return {"resent": [MovedOut.of(item.moved, item.queue.url_path).model_dump() for item in resent]}


async def _export(manager: QueueManager, reader: QueueReader, arguments: argparse.Namespace) -> Any:
    """JSON lines on stdout, a page at a time; nothing else is printed."""
    administration = Administration(manager, reader)
    queue = manager.resolve(arguments.path).url_path
    if arguments.lookup_id:
        lines = await administration.selected(arguments.path, parse_lookup_ids(arguments.lookup_id))
    else:
        budget = answer_budget(load_settings().max_answer_bytes, queue)
        lines = await administration.every_message(arguments.path, budget)
    async for message in lines:
        sys.stdout.buffer.write(to_json(export_line(message, queue)) + b"\n")
    sys.stdout.buffer.flush()
    return None


async def _import(manager: QueueManager, reader: QueueReader, arguments: argparse.Namespace) -> Any:
    limit = load_settings().max_import_bytes
    payload = await asyncio.to_thread(_read, arguments.file, limit + 1)
    if len(payload) > limit:
        raise MqError(
            MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"the file has more than {limit} bytes (MSMQGW_MAX_IMPORT_BYTES)",
        )
    stored = await Administration(manager, reader).import_messages(arguments.path, parse_import(payload))
    return {"queue": manager.resolve(arguments.path).url_path, "imported": len(stored)}


def _read(name: str, limit: int) -> bytes:
    """At most `limit` bytes of the file (`-`: stdin)."""
    if name == "-":
        return sys.stdin.buffer.read(limit)
    with open(name, "rb") as source:
        return source.read(limit)


def message_commands(commands: Any, on_store: OnStore) -> None:
    group = commands.add_parser("message", help="delete, move, resend, export and import chosen messages")
    actions = group.add_subparsers(required=True, metavar="action")
    delete = actions.add_parser("delete", help="delete one message by lookup ID (as a receive would)")
    delete.add_argument("path")
    delete.add_argument("lookup_id")
    delete.set_defaults(handler=on_store(_delete), audited="message delete")
    move = actions.add_parser("move", help="move messages to another queue in one transaction")
    move.add_argument("path")
    move.add_argument("lookup_ids", nargs="+", metavar="lookup_id")
    move.add_argument("--to", required=True, help="the queue they go to")
    move.set_defaults(handler=on_store(_move), audited="message move")
    resend = actions.add_parser("resend", help="resend dead letters to the queues they were sent to")
    resend.add_argument("path", help="system$;deadletter or system$;deadxact")
    resend.add_argument("lookup_ids", nargs="*", metavar="lookup_id")
    resend.add_argument("--all", action="store_true", help="the queue's first 1000 dead letters")
    resend.set_defaults(handler=on_store(_resend), audited="message resend")
    export = actions.add_parser("export", help="print messages as JSON lines (bodies in base64)")
    export.add_argument("path")
    export.add_argument("--lookup-id", action="append", help="only this message (repeat for more)")
    export.set_defaults(handler=on_store(_export))
    load = actions.add_parser("import", help="store the messages of an export file, all or none")
    load.add_argument("path")
    load.add_argument("file", help="a file of JSON lines, or - for stdin")
    load.set_defaults(handler=on_store(_import), audited="message import")
