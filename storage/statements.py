"""The hot-path SQL, named: which rows are available, and how a selector finds one."""

from __future__ import annotations

import sqlalchemy as sa

from qm.model import MAX_PRIORITY
from qm.rules import COUNTER_MASK, lookup_id_for
from qm.store import Seek, Selector
from storage.tables import AVAILABLE, messages

m = messages.c


def available_in(queue_id: int, now_us: int) -> sa.ColumnElement[bool]:
    """Available and not past its time-to-be-received, even if the sweeper is late."""
    return sa.and_(
        m.queue_id == queue_id,
        m.state == AVAILABLE,
        sa.or_(m.ttbr_deadline.is_(None), m.ttbr_deadline > now_us),
    )


def select_target(queue_id: int, selector: Selector, now_us: int, lock_rows: bool) -> sa.Select[tuple[int]]:
    """The lookup ID of the one available message the selector addresses."""
    statement = sa.select(m.lookup_id).where(available_in(queue_id, now_us))
    statement = _narrow(statement, selector).limit(1)
    if lock_rows:
        statement = statement.with_for_update(skip_locked=True)
    return statement


def _narrow(statement: sa.Select[tuple[int]], selector: Selector) -> sa.Select[tuple[int]]:
    if selector.message_id is not None:
        statement = statement.where(m.message_id == selector.message_id)
    if selector.correlation_id is not None:
        statement = statement.where(m.correlation_id == selector.correlation_id)
    seek, reference = selector.seek, selector.lookup_id
    if seek is Seek.CURRENT:
        return statement.where(m.lookup_id == reference)
    if seek is Seek.NEXT:
        return statement.where(m.lookup_id > reference).order_by(m.lookup_id)
    if seek is Seek.PREVIOUS:
        return statement.where(m.lookup_id < reference).order_by(m.lookup_id.desc())
    if seek is Seek.LAST:
        return statement.order_by(m.lookup_id.desc())
    if seek is Seek.ARRIVED_AFTER:
        return statement.where(arrived_after(reference)).order_by(m.lookup_id)
    return statement.order_by(m.lookup_id)


def arrived_after(counter: int) -> sa.ColumnElement[bool]:
    """Messages enqueued after the counter stood at `counter`, one index range per priority."""
    return sa.or_(
        *(
            m.lookup_id.between(lookup_id_for(priority, counter + 1), lookup_id_for(priority, COUNTER_MASK))
            for priority in range(MAX_PRIORITY + 1)
        )
    )
