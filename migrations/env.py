"""Alembic environment: runs migrations on the async engine the gateway uses."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from alembic import context
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.engine import make_engine
from storage.schema import metadata

config = context.config


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    asyncio.run(_run_async(make_engine(config.get_main_option("sqlalchemy.url") or "")))


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `msmq-gateway migrate`")
run_migrations_online()
