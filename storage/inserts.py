"""The insert of messages inside a transaction: counters, lookup and message IDs, the rows and
the queues' totals (sends that need admission, copies and acknowledgments placed by the
queue manager). A plain send on PostgreSQL is one statement instead (storage/sending.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from qm import rules
from qm.model import NewMessage
from storage import driver_sql, rows, send_statements
from storage.counters import allocate_counters
from storage.database import Database
from storage.tables import AVAILABLE
from storage.totals import add_to_totals


async def insert_messages(
    db: Database,
    connection: AsyncConnection,
    batch: Sequence[NewMessage],
    counters: Sequence[int] | None = None,
    queues_held: bool = False,
) -> list[dict[str, Any]]:
    """Assign counters and lookup IDs, insert, and add to the queues' totals; return the rows.

    `counters`: taken already, ascending, at least one per message (the send's room
    statement); the first ones are used. `queues_held`: the transaction holds every target
    queue's row lock, so the insert and the totals may be one statement on PostgreSQL."""
    if not batch:
        return []
    if counters is None:
        counters = await allocate_counters(db, connection, len(batch))
    values = []
    for item, counter in zip(batch, counters[: len(batch)], strict=True):
        lookup_id = rules.lookup_id_for(item.properties.priority, counter)
        message_id = item.message_id or rules.message_id_for(db.identity(), counter)
        values.append(rows.message_values(item, lookup_id, message_id))
    if db.sqlite or not (queues_held or len({value["queue_id"] for value in values}) == 1):
        await driver_sql.execute_many(connection, send_statements.INSERT_MESSAGES, values)
        await add_to_totals(connection, values, sign=1)
    elif len(values) <= send_statements.ROWS_AS_VALUES:
        merged = send_statements.insert_values_adding_to_totals(len(values), tuple(values[0]))
        await driver_sql.fetch(connection, merged, driver_sql.numbered(values))
    else:
        columns = {
            send_statements.value_name(column): [value[column] for value in values] for column in values[0]
        }
        await driver_sql.fetch(connection, send_statements.INSERT_ARRAYS_ADDING_TO_TOTALS, columns)
    Database.changed(connection, (value["queue_id"] for value in values if value["state"] == AVAILABLE))
    return values
