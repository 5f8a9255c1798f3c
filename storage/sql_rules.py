"""Queue-manager rules (qm/) written a second time in SQL, where a statement must decide by
itself to stay one round trip. Each is tied to its Python rule by a property test
(tests/contract/test_sql_rules.py) that runs the SQL on generated rows and compares:

* the lookup and message IDs a counter gives (qm.rules.lookup_id_for, message_id_for);
* "nothing follows this receive" (qm.disposal.DisposalPolicy.consequences, Reason.RECEIVED);
* "this removal may have consequences" (the same, for the negative reasons);
* "every message of this send is admitted" (qm.rules.admit, message after message).

The SQL may say "maybe" where the rule says no (the statement then leaves the decision to
Python), never "no" where the rule says yes."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from qm.model import INFINITE, MAX_PRIORITY, Acknowledgment, JournalFlags
from qm.rules import COUNTER_BITS, COUNTER_MASK, KB, SEQUENCE_MASK
from storage.tables import messages, queue_manager, queues

m = messages.c
q = queues.c


def constant(value: int) -> sa.ColumnElement[int]:
    """An integer of ours written into the SQL: a bound value would take the other operand's
    type (a counter's bigint mask bound as int32, a shift's count as bigint)."""
    return sa.literal_column(str(int(value)), sa.BigInteger)


def lookup_id(priority: sa.ColumnElement[Any], counter: sa.ColumnElement[Any]) -> sa.ColumnElement[int]:
    """rules.lookup_id_for: high byte 7 - priority, low 56 bits the counter."""
    rank = sa.cast(constant(MAX_PRIORITY) - priority, sa.BigInteger)
    return rank.op("<<")(constant(COUNTER_BITS)).op("|")(counter.op("&")(constant(COUNTER_MASK)))


def message_id(prefix: sa.ColumnElement[Any], counter: sa.ColumnElement[Any]) -> sa.ColumnElement[str]:
    """rules.message_id_for with rules.message_id_prefix as `prefix`: `{guid}\\` + sequence."""
    return prefix.concat(sa.cast(counter.op("&")(constant(SEQUENCE_MASK)), sa.Text))


def asks_dead_letter() -> sa.ColumnElement[bool]:
    """MQMSG_DEADLETTER in the message's journal flags."""
    return m.journal.op("&")(constant(JournalFlags.DEADLETTER)) != 0


def nothing_follows_receipt(row: Any = m) -> sa.ColumnElement[bool]:
    """A received message whose removal can place nothing (DisposalPolicy.consequences for
    Reason.RECEIVED), judged from its row alone (`row`: the `messages` columns, or those of
    a CTE returning them) and on the safe side: no receive acknowledgment it asks for (no
    admin queue, or no MQMSG_ACKNOWLEDGMENT_POS_RECEIVE: qm.acks.requested) and no incoming
    SRMP stream (a final receipt). The queue's own journaling is checked apart."""
    asks_on_receipt = row.acknowledge.op("&")(constant(Acknowledgment.POS_RECEIVE)) != 0
    no_acknowledgment = sa.or_(row.admin_queue.is_(None), ~asks_on_receipt)
    return sa.and_(no_acknowledgment, row.srmp_stream_id.is_(None))


def removal_may_follow() -> sa.ColumnElement[bool]:
    """A message whose removal for a negative reason (purge, deletion) may place something:
    it asked for a dead-letter copy (MQMSG_DEADLETTER) or for negative receive
    acknowledgments to an admin queue. A final receipt is asked for with MQMSG_DEADLETTER."""
    asks_negative = m.acknowledge.op("&")(constant(Acknowledgment.NEG_RECEIVE)) != 0
    return sa.or_(asks_dead_letter(), sa.and_(asks_negative, m.admin_queue.is_not(None)))


def admits_all(size: sa.ColumnElement[Any], stored: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """rules.admit accepts each message of a send to the queue (`queues`), one after the other,
    whose sizes add up to `size`, with the queue manager's messages adding up to `stored`
    (read only where the queue manager has a quota): it is not throttled, and neither the
    queue's bytes nor the queue manager's exceed their quota with all of them. Sizes are never
    negative, so where the whole send fits, each message fits after those before it; where it
    does not, the statement stores nothing and the transaction decides message by message."""
    return sa.and_(
        queue_manager.c.throttled.is_(False),
        _within(q.byte_count + size, q.quota_kb),
        # CASE: the queue manager's bytes (a sum over all queues) are read only with a quota.
        sa.case(
            (queue_manager.c.quota_kb == INFINITE, sa.true()),
            else_=stored + size <= queue_manager.c.quota_kb * constant(KB),
        ),
    )


def _within(byte_count: sa.ColumnElement[Any], quota_kb: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """Not rules.exceeds."""
    return sa.or_(quota_kb == INFINITE, byte_count <= quota_kb * constant(KB))
