"""`msmq-gateway keys create|list|revoke`, `certs add|list|delete`, `grant` and `grants`:
principals, API keys, client certificates and rights, on the store directly (whoever can run
this can read the database anyway). Each change is recorded in the audit log as principal
`cli`, client `local`."""

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
from qm.rights import ADMINISTRATOR_GRANTS, QUEUE_MANAGER, Grant, parse_rights, rights_names
from storage.engine import make_engine
from storage.migrate import upgrade
from storage.store import SqlStore

AccessCommand = Callable[[AccessControl, argparse.Namespace], Awaitable[Any]]


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
    changed = await access.change_grant(arguments.principal, scope, add, remove)
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
