"""PostgreSQL's one receive claim: a statement that takes a queue's messages, subtracts them
from its totals and writes an outbox row for each whose removal may place something, locking
no queue row but its own (docs/store.md, "Receives"). What the claim takes is its target: the
queue's first messages, as many as fit in a size, or the one a selector addresses."""

from __future__ import annotations

import enum
import functools
from typing import Any, NamedTuple

import sqlalchemy as sa

from qm.disposal import Reason
from storage import sql_rules, statements
from storage.statements import available, queue_order
from storage.tables import messages, outbox, queues
from storage.totals import onto_totals

m = messages.c
q = queues.c

QUEUE_KEY = "queue_key"
"""The claim's column for the queue's path key as it is now (none: the ID names no queue)."""
QUEUE_LOCKED = "queue_locked"
"""The claim's column: whether it locked the queue's row (false: another transaction holds
it, and nothing was taken; the waiting form then runs in a transaction)."""
AVAILABLE_BEFORE = "available_before"
"""The first messages' claim: how many messages the queue had available when the statement
began (its snapshot: those it took included), counted up to statements.COUNT_AT_MOST."""
DEPARTED = "departed"
"""The claim's column for the lookup ID of a message taken whose outbox row it wrote (NULL:
its removal places nothing)."""


class Aim(enum.Enum):
    """What a claim takes from the queue."""

    FIRST = "first"
    """The first `:limit` available messages."""
    FITTING = "fitting"
    """The first `:limit` available messages whose weights (statements.WEIGHT, bound from a
    qm.store.Budget) fit in `:max_bytes` (at least one)."""
    SELECTED = "selected"
    """The message a selector addresses (statements.select_target)."""


class Target(NamedTuple):
    aim: Aim
    shape: statements.TargetShape | None = None
    """The selector's shape, for Aim.SELECTED."""


@functools.cache
def claim(target: Target, wait: bool = False) -> sa.Select[Any]:
    """The claim of `target` in the queue `:queue` if its path key is still `:key` (values:
    statements.available_values or target_values, `key`, `limit`, a budget's statements.budget_values).

    The queue's row is locked first (FOR NO KEY UPDATE, as the totals take it), SKIP LOCKED
    unless `wait`: a statement that commits by itself must not wait, or a caller cancelled
    meanwhile loses its message (the waiting form runs in a transaction). Its journaling is
    read under that lock. Then the target's rows FOR UPDATE SKIP LOCKED, deleted; the totals;
    and the outbox rows. Rows: none if the ID names no queue; else one per message taken
    (one with NULL message columns if none), each with QUEUE_KEY, QUEUE_LOCKED and
    DEPARTED (and AVAILABLE_BEFORE for Aim.FIRST)."""
    queue_id = sa.bindparam("queue", type_=sa.Integer)
    queue_row = (
        sa.select(q.id, q.kind, q.name, q.journal_of, q.journal)
        .where(q.id == queue_id, q.path_key == sa.bindparam("key", type_=q.path_key.type))
        .with_for_update(key_share=True, skip_locked=not wait)
        .cte("queue_row")
    )
    locked = sa.exists(sa.select(queue_row.c.id))
    chosen = _chosen(target, locked)
    # `lookup_id = ANY(ARRAY(subquery))`, the rows found through the primary key: with `IN
    # (subquery)` the generic plan, which cannot see `:limit`, expects a tenth of the table
    # and joins against a scan of all of it (tests/contract/test_query_plans.py).
    taken = (
        sa.delete(messages)
        .where(m.lookup_id == sa.any_(sa.func.array(chosen.scalar_subquery())))
        .returning(*messages.c)
        .cte("taken")
    )
    totals = onto_totals(taken, sign=-1).cte("totals")
    departed = _departed(taken, queue_row).cte("departed")
    queue_now = sa.select(q.path_key).where(q.id == queue_id).subquery("queue_now")
    facts = [queue_now.c.path_key.label(QUEUE_KEY), locked.label(QUEUE_LOCKED)]
    if target.aim is Aim.FIRST:
        facts.append(_available_before().label(AVAILABLE_BEFORE))
    taken_and_departed = taken.outerjoin(departed, departed.c.lookup_id == taken.c.lookup_id)
    return (
        sa.select(*facts, departed.c.lookup_id.label(DEPARTED), *(taken.c[c.key] for c in messages.c))
        .select_from(queue_now.outerjoin(taken_and_departed, sa.true()))
        .order_by(taken.c.lookup_id)
        .add_cte(totals)
    )


def _chosen(target: Target, locked: sa.Exists) -> sa.Select[Any]:
    """The lookup IDs the claim takes, their rows locked (SKIP LOCKED: never waiting), none
    unless the queue's row is locked."""
    if target.aim is Aim.SELECTED:
        assert target.shape is not None and target.shape.lock_rows
        return statements.select_target(target.shape).where(locked)
    first = (
        sa.select(m.lookup_id, statements.WEIGHT.label("weight"))
        .where(available(pinned=True), locked)
        .order_by(*queue_order(queue_first=True))
        .limit(sa.bindparam("limit", type_=sa.Integer))
        .with_for_update(skip_locked=True)
    )
    if target.aim is Aim.FIRST:
        return first.with_only_columns(m.lookup_id)
    # As qm.store.Budget.fitting: in queue order while the weights fit, and always the first.
    sized = first.subquery("sized")
    order = sized.c.lookup_id
    running = sa.select(
        sized.c.lookup_id,
        sa.func.sum(sized.c.weight).over(order_by=order).label("running"),
        sa.func.row_number().over(order_by=order).label("place"),
    ).subquery("running")
    fits = running.c.running <= sa.bindparam("max_bytes", type_=sa.BigInteger)
    return sa.select(running.c.lookup_id).where(sa.or_(fits, running.c.place == 1))


def _departed(taken: sa.CTE, queue_row: sa.CTE) -> sa.Insert:
    """An outbox row for each message taken whose removal may place something: the queue
    journals, or the SQL stand-in for the policy (sql_rules.nothing_follows_receipt) cannot
    say that nothing follows. Written with the queue as it is under the claim's lock."""
    columns = [c.key for c in messages.c]
    may_follow = sa.or_(queue_row.c.journal, ~sql_rules.nothing_follows_receipt(taken.c))
    rows = (
        sa.select(
            sa.literal_column(f"'{Reason.RECEIVED.name}'", sa.String).label("reason"),
            sa.bindparam("now", type_=sa.BigInteger).label("departed_at"),
            queue_row.c.kind,
            queue_row.c.name,
            queue_row.c.journal_of.is_not(None),
            queue_row.c.journal,
            *(taken.c[column] for column in columns),
        )
        .select_from(taken.join(queue_row, sa.true()))
        .where(may_follow)
    )
    names = ["reason", "departed_at", "queue_kind", "queue_name", "queue_is_journal", "queue_journal"]
    return sa.insert(outbox).from_select(names + columns, rows).returning(outbox.c.lookup_id)


def _available_before() -> sa.ScalarSelect[Any]:
    some = sa.select(m.lookup_id).where(available(pinned=True)).order_by(*queue_order(queue_first=True))
    counted = some.limit(statements.COUNT_AT_MOST).subquery()
    return sa.select(sa.func.count()).select_from(counted).scalar_subquery()
