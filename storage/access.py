"""Principals, API key hashes, grants and the audit log (qm.access.AccessRepository)."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.access import ApiKeyRecord, AuditEntry, CertificateMapping, Principal
from qm.errors import MqError, MqErrorCode
from qm.rights import Grant, names_exactly
from storage import rows
from storage.access_tables import api_keys, audit_log, client_certificates, grants, principals, queue_owners
from storage.database import Database
from storage.tables import queues

p = principals.c
k = api_keys.c
g = grants.c
a = audit_log.c
c = client_certificates.c
o = queue_owners.c


class SqlAccess:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def ensure_principal(self, name: str, description: str, now: datetime) -> Principal:
        found = await self._principal(name)
        if found is not None:
            return found
        try:
            async with self._db.transaction() as connection:
                await connection.execute(
                    sa.insert(principals).values(
                        name=name, description=description, created_at=rows.to_us(now)
                    )
                )
        except sa.exc.IntegrityError:  # created concurrently: the same principal
            pass
        created = await self._principal(name)
        assert created is not None
        return created

    async def _principal(self, name: str) -> Principal | None:
        async with self._db.reading() as connection:
            row = (await connection.execute(sa.select(principals).where(p.name == name))).first()
        return None if row is None else _principal(row)

    async def list_principals(self) -> list[Principal]:
        async with self._db.reading() as connection:
            found = await connection.execute(sa.select(principals).order_by(p.name))
            return [_principal(row) for row in found]

    async def delete_principal(self, name: str) -> bool:
        async with self._db.transaction() as connection:
            # Explicitly, not by the foreign keys' cascade alone: one rule on both stores.
            await connection.execute(sa.delete(api_keys).where(k.principal == name))
            await connection.execute(sa.delete(client_certificates).where(c.principal == name))
            await connection.execute(sa.delete(grants).where(g.principal == name))
            await connection.execute(sa.delete(queue_owners).where(o.principal == name))
            deleted = await connection.execute(sa.delete(principals).where(p.name == name))
        return bool(deleted.rowcount)

    async def add_key(self, record: ApiKeyRecord) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.insert(api_keys).values(
                    key_id=record.key_id,
                    principal=record.principal,
                    salt=record.salt,
                    hash=record.hash,
                    description=record.description,
                    created_at=rows.to_us(record.created_at),
                    revoked_at=rows.optional_us(record.revoked_at),
                )
            )

    async def find_key(self, key_id: str) -> ApiKeyRecord | None:
        async with self._db.reading() as connection:
            row = (await connection.execute(sa.select(api_keys).where(k.key_id == key_id))).first()
        return None if row is None else _key(row)

    async def list_keys(self, principal: str | None) -> list[ApiKeyRecord]:
        query = sa.select(api_keys).order_by(k.principal, k.created_at, k.key_id)
        if principal is not None:
            query = query.where(k.principal == principal)
        async with self._db.reading() as connection:
            return [_key(row) for row in await connection.execute(query)]

    async def revoke_key(self, key_id: str, now: datetime) -> bool:
        async with self._db.transaction() as connection:
            revoked = await connection.execute(
                sa.update(api_keys)
                .where(k.key_id == key_id, k.revoked_at.is_(None))
                .values(revoked_at=rows.to_us(now))
            )
        return bool(revoked.rowcount)

    async def add_certificate(self, mapping: CertificateMapping) -> CertificateMapping:
        values = {
            "identity": certificate_identity(mapping.subject, mapping.issuer),
            "subject": mapping.subject,
            "issuer": mapping.issuer,
            "principal": mapping.principal,
            "description": mapping.description,
            "created_at": rows.to_us(mapping.created_at),
        }
        try:
            async with self._db.transaction() as connection:
                added = await connection.execute(sa.insert(client_certificates).values(**values))
        except sa.exc.IntegrityError:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                "a certificate of this subject and issuer is mapped already (delete that mapping first)",
            ) from None
        (mapping_id,) = added.inserted_primary_key or (0,)
        return dataclasses.replace(mapping, id=int(mapping_id))

    async def find_certificate(self, subject: str, issuer: str) -> CertificateMapping | None:
        """By the SHA-256 of both names, then compared as written (the hash only finds the row)."""
        query = sa.select(client_certificates).where(c.identity == certificate_identity(subject, issuer))
        async with self._db.reading() as connection:
            row = (await connection.execute(query)).first()
        if row is None or (row.subject, row.issuer) != (subject, issuer):
            return None
        return _certificate(row)

    async def list_certificates(self, principal: str | None) -> list[CertificateMapping]:
        query = sa.select(client_certificates).order_by(c.id)
        if principal is not None:
            query = query.where(c.principal == principal)
        async with self._db.reading() as connection:
            return [_certificate(row) for row in await connection.execute(query)]

    async def delete_certificate(self, mapping_id: int) -> bool:
        async with self._db.transaction() as connection:
            deleted = await connection.execute(sa.delete(client_certificates).where(c.id == mapping_id))
        return bool(deleted.rowcount)

    async def grants_of(self, principal: str) -> list[Grant]:
        return await self.list_grants(principal)

    async def list_grants(self, principal: str | None) -> list[Grant]:
        query = sa.select(g.principal, g.queue, g.rights, g.exact).order_by(g.principal, g.id)
        if principal is not None:
            query = query.where(g.principal == principal)
        async with self._db.reading() as connection:
            return [_grant(row) for row in await connection.execute(query)]

    async def change_grant(
        self, principal: str, queue: str | None, add: int, remove: int, exact: bool = False
    ) -> Grant | None:
        """One row per principal and scope: the old rows are read, merged and replaced in one
        transaction (rows two processes added at once merge the next time). The scope of a path
        without `*`, or of an exact grant, is that one queue, its rows found as paths compare
        (qm.rights.names_exactly); a pattern's scope is the pattern as written."""
        own = queue is not None and (exact or "*" not in queue)
        async with self._db.transaction() as connection:
            old = await _scope_rows(connection, principal, queue, own)
            rights = 0
            for _id, value in old:
                rights |= value
            rights = (rights | add) & ~remove
            if old:
                await connection.execute(sa.delete(grants).where(g.id.in_([row_id for row_id, _ in old])))
            if not rights:
                return None
            # `exact` only where it changes what the path means: a `*` in a queue's name.
            marked = own and queue is not None and "*" in queue
            await connection.execute(
                sa.insert(grants).values(principal=principal, queue=queue, rights=rights, exact=marked)
            )
        return Grant(principal, queue, rights, marked)

    async def delete_queue_grants(self, queue: str) -> int:
        """Compared in Python (qm.rights.fold): SQL's lower() folds more than ASCII on PostgreSQL."""
        async with self._db.transaction() as connection:
            found = await connection.execute(sa.select(g.id, g.queue, g.exact).where(g.queue.is_not(None)))
            ids = [row.id for row in found if names_exactly(row.queue, row.exact, queue)]
            if ids:
                await connection.execute(sa.delete(grants).where(g.id.in_(ids)))
        return len(ids)

    async def queue_owner(self, path_key: str) -> str | None:
        query = (
            sa.select(o.principal)
            .join(queues, queues.c.id == o.queue_id)
            .where(queues.c.path_key == path_key)
        )
        async with self._db.reading() as connection:
            owner: str | None = (await connection.execute(query)).scalar()
        return owner

    async def set_queue_owner(self, path_key: str, principal: str) -> bool:
        """False when there is no such queue. The principal must exist (ensure_principal)."""
        try:
            return await self._set_queue_owner(path_key, principal)
        except sa.exc.IntegrityError:  # owned or deleted concurrently: decide again from what is now
            return await self._set_queue_owner(path_key, principal)

    async def _set_queue_owner(self, path_key: str, principal: str) -> bool:
        async with self._db.transaction() as connection:
            queue_id = (
                await connection.execute(sa.select(queues.c.id).where(queues.c.path_key == path_key))
            ).scalar()
            if queue_id is None:
                return False
            await connection.execute(sa.delete(queue_owners).where(o.queue_id == queue_id))
            await connection.execute(sa.insert(queue_owners).values(queue_id=queue_id, principal=principal))
        return True

    async def record_audit(self, entry: AuditEntry) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(sa.insert(audit_log).values(**_audit_values(entry)))

    async def audit_page(self, before_id: int | None, limit: int) -> list[AuditEntry]:
        query = sa.select(audit_log).order_by(a.id.desc()).limit(limit)
        if before_id is not None:
            query = query.where(a.id < before_id)
        async with self._db.reading() as connection:
            return [_audit(row) for row in await connection.execute(query)]

    async def prune_audit(self, older_than: datetime) -> int:
        async with self._db.transaction() as connection:
            pruned = await connection.execute(sa.delete(audit_log).where(a.at < rows.to_us(older_than)))
        return int(pruned.rowcount)


def _grant(row: Any) -> Grant:
    return Grant(row.principal, row.queue, row.rights, bool(row.exact))


async def _scope_rows(
    connection: AsyncConnection, principal: str, queue: str | None, own: bool
) -> list[tuple[int, int]]:
    """(id, rights) of the principal's grants on the scope: the queue manager (None), one
    queue's own grants (`own`: compared in Python, as SQL's lower() folds more than ASCII on
    PostgreSQL), or a pattern as written."""
    if queue is None or not own:
        scope = g.queue.is_(None) if queue is None else sa.and_(g.queue == queue, g.exact.is_(False))
        found = await connection.execute(sa.select(g.id, g.rights).where(g.principal == principal, scope))
        return [(row.id, row.rights) for row in found]
    found = await connection.execute(
        sa.select(g.id, g.queue, g.rights, g.exact).where(g.principal == principal, g.queue.is_not(None))
    )
    return [(row.id, row.rights) for row in found if names_exactly(row.queue, row.exact, queue)]


def _principal(row: Any) -> Principal:
    return Principal(row.name, row.description, rows.from_us(row.created_at))


def certificate_identity(subject: str, issuer: str) -> str:
    """Both names, unambiguously joined (a NUL is in neither), as 64 hex digits."""
    return hashlib.sha256(f"{subject}\0{issuer}".encode()).hexdigest()


def _certificate(row: Any) -> CertificateMapping:
    return CertificateMapping(
        row.subject, row.issuer, row.principal, row.description, rows.from_us(row.created_at), row.id
    )


def _key(row: Any) -> ApiKeyRecord:
    return ApiKeyRecord(
        row.key_id,
        row.principal,
        bytes(row.salt),
        bytes(row.hash),
        row.description,
        rows.from_us(row.created_at),
        rows.optional_time(row.revoked_at),
    )


def _audit_values(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at": rows.to_us(entry.at),
        "principal": entry.principal[:124],
        "client": entry.client[:128],
        "action": entry.action[:200],
        "target": entry.target[:2000],
        "outcome": entry.outcome[:64],
    }


def _audit(row: Any) -> AuditEntry:
    return AuditEntry(
        rows.from_us(row.at), row.principal, row.client, row.action, row.target, row.outcome, row.id
    )
