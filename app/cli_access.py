"""`msmq-gateway keys create|list|revoke`, `certs add|list|delete`, `grant`, `grants` and
`queue permissions|owner`: principals, API keys, client certificates, rights and queue owners,
on the store directly (whoever can run this can read the database anyway). Each change is
recorded in the audit log as principal `cli`, client `local`."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from app.client_certs import map_certificate
from app.keys import key_record
from app.settings import Settings
from qm.access import (
    AccessControl,
    AuditEntry,
    CertificateMapping,
    check_provable_principal,
)
from qm.clock import SystemClock
from qm.errors import MqError, MqErrorCode
from qm.model import Queue
from qm.paths import parse_queue_path
from qm.queue_security import OWNER_IMPLICIT, queue_security, securable
from qm.rights import ADMINISTRATOR_GRANTS, QUEUE_MANAGER, Grant, parse_rights, rights_names
from storage.engine import make_engine
from storage.migrate import upgrade
from storage.store import SqlStore

AccessCommand = Callable[[AccessControl, argparse.Namespace], Awaitable[Any]]
QueueCommand = Callable[[AccessControl, Queue, argparse.Namespace], Awaitable[Any]]


def _on_access(command: AccessCommand) -> Callable[[Settings, argparse.Namespace], int]:
    def run(settings: Settings, arguments: argparse.Namespace) -> int:
        upgrade(settings.database_url)
        print(json.dumps(asyncio.run(_with_access(settings, arguments, command)), indent=2, default=str))
        return 0

    return run


async def _with_access(settings: Settings, arguments: argparse.Namespace, command: AccessCommand) -> Any:
    store = SqlStore(make_engine(settings.database_url, driver_sql=settings.driver_sql))
    try:
        return await command(AccessControl(store.access, SystemClock(), settings.auth_cache_ttl_s), arguments)
    finally:
        await store.close()


def _on_queue(command: QueueCommand) -> Callable[[Settings, argparse.Namespace], int]:
    """A command on one public or private queue's security, the queue found as REST finds it."""

    def run(settings: Settings, arguments: argparse.Namespace) -> int:
        upgrade(settings.database_url)
        print(json.dumps(asyncio.run(_with_queue(settings, arguments, command)), indent=2, default=str))
        return 0

    return run


async def _with_queue(settings: Settings, arguments: argparse.Namespace, command: QueueCommand) -> Any:
    path = securable(parse_queue_path(arguments.path))
    store = SqlStore(make_engine(settings.database_url, driver_sql=settings.driver_sql))
    try:
        queue = await store.queues.find_queue(path)
        if queue is None:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, f"no queue {path.url_path}")
        access = AccessControl(store.access, SystemClock(), settings.auth_cache_ttl_s)
        return await command(access, queue, arguments)
    finally:
        await store.close()


async def queue_deleted(settings: Settings, text: str) -> None:
    """After `queue delete`: the queue's own grants go with it, as they do over REST and SOAP
    (its owner goes with its row), so a queue created later under its name inherits nothing."""
    store = SqlStore(make_engine(settings.database_url, driver_sql=settings.driver_sql))
    try:
        access = AccessControl(store.access, SystemClock(), settings.auth_cache_ttl_s)
        await access.queue_deleted(parse_queue_path(text).url_path)
    finally:
        await store.close()


async def _queue_permissions(access: AccessControl, queue: Queue, _arguments: argparse.Namespace) -> Any:
    owner = await access.owner_of(queue.path.url_path)
    security = queue_security(queue.path, owner, await access.store.list_grants(None))
    return {
        "queue": queue.path.url_path,
        "owner": security.owner,
        "owner_rights": rights_names(OWNER_IMPLICIT, queue.path.url_path),
        "grants": [
            {
                "principal": entry.principal,
                "queue": entry.queue,
                "own": entry.own,
                "rights": rights_names(entry.rights, entry.queue),
            }
            for entry in security.entries
        ],
    }


async def _queue_owner(access: AccessControl, queue: Queue, arguments: argparse.Namespace) -> Any:
    """The machine is trusted: the CLI sets any principal as owner (Windows: SeRestorePrivilege)."""
    if not await access.set_owner(queue.path, arguments.principal):
        raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, f"no queue {queue.path.url_path}")
    target = f"path={queue.path.url_path} principal={arguments.principal}"
    await _audit(access, "cli queue owner", target)
    return {"queue": queue.path.url_path, "owner": arguments.principal}


def add_queue_commands(actions: Any) -> None:
    """`queue permissions PATH`, `queue owner PATH --principal NAME`."""
    shown = actions.add_parser("permissions", help="a queue's owner and the grants that reach it")
    shown.add_argument("path")
    shown.set_defaults(handler=_on_queue(_queue_permissions))
    owner = actions.add_parser("owner", help="make a principal the owner of a queue")
    owner.add_argument("path")
    owner.add_argument("--principal", required=True, help="the new owner (created if new)")
    owner.set_defaults(handler=_on_queue(_queue_owner))


async def _audit(access: AccessControl, action: str, target: str) -> None:
    await access.store.record_audit(AuditEntry(access.clock.now(), "cli", "local", action, target, "allowed"))


async def _keys_create(access: AccessControl, arguments: argparse.Namespace) -> Any:
    principal = check_provable_principal(arguments.principal)
    now = access.clock.now()
    await access.store.ensure_principal(principal, "", now)
    text, record = key_record(principal, arguments.description, now)
    await access.store.add_key(record)
    if arguments.admin:
        await access.give([Grant(principal, scope, rights) for scope, rights in ADMINISTRATOR_GRANTS])
    await _audit(access, "cli keys create", f"principal={principal} key_id={record.key_id}")
    return {"key": text, "key_id": record.key_id, "principal": principal, "shown": "once: keep it now"}


async def _keys_list(access: AccessControl, arguments: argparse.Namespace) -> Any:
    return [
        {
            "key_id": record.key_id,
            "principal": record.principal,
            "description": record.description,
            "created_at": record.created_at.isoformat(),
            "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None,
        }
        for record in await access.store.list_keys(arguments.principal)
    ]


async def _keys_revoke(access: AccessControl, arguments: argparse.Namespace) -> Any:
    if not await access.store.revoke_key(arguments.key_id, access.clock.now()):
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_HANDLE, f"no live key {arguments.key_id!r}")
    await _audit(access, "cli keys revoke", f"key_id={arguments.key_id}")
    return {"revoked": arguments.key_id}


async def _certs_add(access: AccessControl, arguments: argparse.Namespace) -> Any:
    mapping = await map_certificate(
        access.store,
        arguments.subject,
        arguments.issuer,
        arguments.principal,
        arguments.description,
        access.clock.now(),
    )
    await _audit(access, "cli certs add", f"id={mapping.id} principal={mapping.principal}")
    return _mapping(mapping)


async def _certs_list(access: AccessControl, arguments: argparse.Namespace) -> Any:
    return [_mapping(mapping) for mapping in await access.store.list_certificates(arguments.principal)]


async def _certs_delete(access: AccessControl, arguments: argparse.Namespace) -> Any:
    if not await access.store.delete_certificate(arguments.id):
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_HANDLE, f"no client certificate mapping {arguments.id}")
    await _audit(access, "cli certs delete", f"id={arguments.id}")
    return {"deleted": arguments.id}


def _mapping(mapping: CertificateMapping) -> dict[str, Any]:
    return {
        "id": mapping.id,
        "subject": mapping.subject,
        "issuer": mapping.issuer,
        "principal": mapping.principal,
        "description": mapping.description,
        "created_at": mapping.created_at.isoformat(),
    }


async def _grant(access: AccessControl, arguments: argparse.Namespace) -> Any:
    scope = arguments.queue or QUEUE_MANAGER
    rights = parse_rights(arguments.rights, scope)
    add, remove = (0, rights) if arguments.revoke else (rights, 0)
    changed = await access.change_grant(arguments.principal, scope, add, remove, arguments.exact)
    verb = "revoke" if arguments.revoke else "grant"
    await _audit(
        access, f"cli {verb}", f"principal={arguments.principal} queue={scope} rights={arguments.rights}"
    )
    held = changed.rights if changed else 0
    return {
        "principal": arguments.principal,
        "queue": scope,
        "rights": rights_names(held, scope),
        "mask": held,
    }


async def _grants(access: AccessControl, arguments: argparse.Namespace) -> Any:
    return [
        {
            "principal": grant.principal,
            "queue": grant.queue,
            "rights": rights_names(grant.rights, grant.queue),
        }
        for grant in await access.store.list_grants(arguments.principal)
    ]


def add_commands(commands: Any) -> None:
    keys = commands.add_parser("keys", help="create, list and revoke API keys")
    actions = keys.add_subparsers(required=True, metavar="action")
    create = actions.add_parser("create", help="create an API key (printed once)")
    create.add_argument("--principal", required=True, help="who the key proves (created if new)")
    create.add_argument("--description", default="")
    create.add_argument("--admin", action="store_true", help="also give the principal every right")
    create.set_defaults(handler=_on_access(_keys_create))
    listing = actions.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--principal")
    listing.set_defaults(handler=_on_access(_keys_list))
    revoke = actions.add_parser("revoke", help="revoke a key")
    revoke.add_argument("key_id")
    revoke.set_defaults(handler=_on_access(_keys_revoke))
    _add_certs_commands(commands)
    grant = commands.add_parser(
        "grant", help="give (or --revoke) rights on a queue pattern or the queue manager"
    )
    grant.add_argument("principal")
    grant.add_argument(
        "rights", help="comma-separated names, e.g. RECEIVE_MESSAGE,WRITE_MESSAGE (docs/security.md)"
    )
    grant.add_argument(
        "--queue", help="queue path or pattern (`*` = any characters); none: the queue manager"
    )
    grant.add_argument(
        "--exact", action="store_true", help="exactly the queue named --queue: its `*` are part of the name"
    )
    grant.add_argument("--revoke", action="store_true")
    grant.set_defaults(handler=_on_access(_grant))
    grants = commands.add_parser("grants", help="list grants")
    grants.add_argument("--principal")
    grants.set_defaults(handler=_on_access(_grants))


def _add_certs_commands(commands: Any) -> None:
    certs = commands.add_parser("certs", help="map TLS client certificates to principals")
    actions = certs.add_subparsers(required=True, metavar="action")
    add = actions.add_parser("add", help="make a client certificate (subject and issuer) prove a principal")
    add.add_argument("--principal", required=True, help="who the certificate proves (created if new)")
    add.add_argument(
        "--subject", required=True, help="RFC 4514, exactly as GET /api/me shows it, e.g. CN=winbox,O=Example"
    )
    add.add_argument("--issuer", required=True, help="the issuing CA's subject, RFC 4514, the same way")
    add.add_argument("--description", default="")
    add.set_defaults(handler=_on_access(_certs_add))
    listing = actions.add_parser("list", help="list the mappings")
    listing.add_argument("--principal")
    listing.set_defaults(handler=_on_access(_certs_list))
    delete = actions.add_parser("delete", help="delete a mapping: its certificate is anonymous again")
    delete.add_argument("id", type=int)
    delete.set_defaults(handler=_on_access(_certs_delete))
