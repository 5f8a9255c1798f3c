"""The queue-manager rules written a second time in SQL (storage/sql_rules.py), run by the
database on generated rows and compared with the Python rule they stand in for. The SQL may
answer "maybe" where the rule answers no (the statement then lets Python decide), never "no"
where the rule answers yes; ID composition must be exact."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qm import rules
from qm.disposal import Departure, DisposalPolicy, Reason
from qm.final_receipts import StreamOrigin
from qm.format_names import LocalIdentity
from qm.model import INFINITE, MAX_PRIORITY, Message, MessageProperties, NewMessage, QueueSettings
from qm.paths import QueueKind, QueuePath
from qm.rules import COUNTER_MASK
from qm.store import Budget, EnqueueOutcome, Footprint
from qm.streams import StreamPosition
from storage import rows, sql_rules, statements
from storage.tables import messages, queue_manager, queues

OURS = uuid.UUID("8f8e5c52-3a40-4c5e-9c7e-0d1b2a3c4d5e")
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
POLICY = DisposalPolicy(LocalIdentity(OURS, frozenset({"gw01"})))
ORDERS = QueuePath(QueueKind.PRIVATE, "orders")
ADMIN_QUEUES = st.sampled_from(
    [None, r".\private$\acks", "DIRECT=OS:gw01\\private$\\acks", "DIRECT=HTTP://client01/msmq/private$/acks"]
)
RECEIPTS_TO = st.sampled_from(
    ["http://client01/msmq/private$/order_queue$", "", "http://gw01/msmq/private$/own"]
)
EXAMPLES = settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
SIZES = st.integers(0, 3 * 1024)
QUOTAS = st.one_of(st.just(INFINITE), st.integers(0, 4))


@pytest.fixture
def engine(database_url: str) -> Iterator[sa.Engine]:
    """A synchronous engine on the test's database (hypothesis drives plain functions), with one
    queue row for the generated messages."""
    url = sa.engine.make_url(database_url)
    url = url.set(drivername="postgresql+psycopg" if url.get_backend_name() == "postgresql" else "sqlite")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.insert(queues).values(rows.queue_values(ORDERS, QueueSettings(), NOW)))
        connection.execute(
            sa.insert(queue_manager).values(
                id=1, guid=str(OURS), quota_kb=INFINITE, throttled=False, counter=0, created_at=0
            )
        )
    yield engine
    engine.dispose()


def _judged(engine: sa.Engine, judge: sa.ColumnElement[bool], values: dict[str, Any]) -> bool:
    """The SQL's verdict on one message row with `values`, the row rolled back afterwards."""
    with engine.connect() as connection:
        queue_id = connection.execute(sa.select(queues.c.id)).scalar_one()
        connection.execute(sa.insert(messages).values({**values, "queue_id": queue_id}))
        verdict = connection.execute(sa.select(judge).where(messages.c.lookup_id == values["lookup_id"]))
        found = bool(verdict.scalar_one())
        connection.rollback()
    return found


def _message_and_row(
    journal: int, acknowledge: int, admin_queue: str | None, stream: bool, transactional: bool
) -> tuple[Message, dict[str, Any]]:
    properties = MessageProperties(
        body=b"x", journal=journal, acknowledge=acknowledge, admin_queue=admin_queue or ""
    )
    row = _row(properties, transactional, StreamPosition("uuid:stream-1", 3) if stream else None)
    return rows.message_from_row(row), row


def _row(
    properties: MessageProperties, transactional: bool = False, stream: StreamPosition | None = None
) -> dict[str, Any]:
    """The stored row of a message with `properties`, sent now."""
    new = NewMessage(
        queue_id=1,
        properties=properties,
        message_id="{00000000-0000-0000-0000-000000000001}\\1",
        sent_time=NOW,
        arrived_time=NOW,
        source_machine=uuid.uuid4(),
        ttbr_deadline=None,
        ttrq_deadline=None,
        transactional=transactional,
        stream=stream,
    )
    return rows.message_values(new, rules.lookup_id_for(0, 1), new.message_id)


def _consequences(message: Message, reason: Reason, transactional: bool, receipts_to: str) -> list[Any]:
    origin = None
    if message.stream is not None:
        origin = StreamOrigin(message.stream.stream_id, receipts_to, "http://gw01/msmq/private$/orders", 3)
    departure = Departure(message, ORDERS, False, transactional, origin)
    return POLICY.consequences(departure, reason, NOW)


@EXAMPLES
@given(
    journal=st.integers(0, 3),
    acknowledge=st.integers(0, 0x0F),
    admin_queue=ADMIN_QUEUES,
    stream=st.booleans(),
    transactional=st.booleans(),
    receipts_to=RECEIPTS_TO,
)
def test_nothing_follows_a_receipt_only_where_the_policy_places_nothing(
    engine: sa.Engine,
    journal: int,
    acknowledge: int,
    admin_queue: str | None,
    stream: bool,
    transactional: bool,
    receipts_to: str,
) -> None:
    """PostgreSQL's claim (storage/claims.py) writes no outbox row for a received message only
    where this says nothing follows (the queue's journaling is checked apart: here it is off)."""
    message, row = _message_and_row(journal, acknowledge, admin_queue, stream, transactional)
    if _judged(engine, sql_rules.nothing_follows_receipt(), row):
        assert _consequences(message, Reason.RECEIVED, transactional, receipts_to) == []


@EXAMPLES
@given(
    journal=st.integers(0, 3),
    acknowledge=st.integers(0, 0x0F),
    admin_queue=ADMIN_QUEUES,
    stream=st.booleans(),
    transactional=st.booleans(),
    receipts_to=RECEIPTS_TO,
    reason=st.sampled_from([Reason.PURGED, Reason.QUEUE_DELETED]),
)
def test_a_removal_the_policy_acts_on_is_one_the_sql_says_may_have_consequences(
    engine: sa.Engine,
    journal: int,
    acknowledge: int,
    admin_queue: str | None,
    stream: bool,
    transactional: bool,
    receipts_to: str,
    reason: Reason,
) -> None:
    """A purge or a deletion removes in batches, with what each removal earns, only the messages
    this selects; the rest goes in bulk, placing nothing (storage/removal.py)."""
    message, row = _message_and_row(journal, acknowledge, admin_queue, stream, transactional)
    if _consequences(message, reason, transactional, receipts_to):
        assert _judged(engine, sql_rules.removal_may_follow(), row)


@EXAMPLES
@given(
    priority=st.integers(0, MAX_PRIORITY),
    counter=st.one_of(st.integers(1, 2**20), st.integers(COUNTER_MASK - 2**20, COUNTER_MASK + 2**20)),
    guid=st.uuids(),
)
def test_the_sql_ids_of_a_counter_are_the_rules_ids(
    engine: sa.Engine, priority: int, counter: int, guid: uuid.UUID
) -> None:
    """send_statements.ENQUEUE_PLAIN composes lookup and message IDs in SQL."""
    given_counter = sa.literal(counter, sa.BigInteger)
    prefix = sa.literal(rules.message_id_prefix(guid), sa.Text)
    statement = sa.select(
        sql_rules.lookup_id(sa.literal(priority, sa.SmallInteger), given_counter),
        sql_rules.message_id(prefix, given_counter),
    )
    with engine.connect() as connection:
        lookup_id, message_id = connection.execute(statement).one()
    assert lookup_id == rules.lookup_id_for(priority, counter)
    assert message_id == rules.message_id_for(guid, counter)


@EXAMPLES
@given(
    queue_quota=QUOTAS,
    machine_quota=QUOTAS,
    throttled=st.booleans(),
    sizes=st.lists(SIZES, min_size=1, max_size=5),
    queue_bytes=SIZES,
    total_bytes=SIZES,
)
def test_the_sql_admits_a_whole_send_exactly_where_the_rule_admits_each_message(
    engine: sa.Engine,
    queue_quota: int,
    machine_quota: int,
    throttled: bool,
    sizes: list[int],
    queue_bytes: int,
    total_bytes: int,
) -> None:
    """send_statements.ENQUEUE_PLAIN stores a batch without a decision in Python exactly
    where this holds (elsewhere the transaction decides message by message)."""
    size, stored = sa.bindparam("size", type_=sa.BigInteger), sa.bindparam("stored", type_=sa.BigInteger)
    judge = sa.select(sql_rules.admits_all(size, stored)).select_from(queues.join(queue_manager, sa.true()))
    with engine.connect() as connection:
        connection.execute(sa.update(queues).values(quota_kb=queue_quota, byte_count=queue_bytes))
        connection.execute(sa.update(queue_manager).values(quota_kb=machine_quota, throttled=throttled))
        admitted = bool(connection.execute(judge, {"size": sum(sizes), "stored": total_bytes}).scalar_one())
        connection.rollback()
    each = True
    for size_of_one in sizes:
        outcome = rules.admit(size_of_one, queue_bytes, queue_quota, total_bytes, machine_quota, throttled)
        each = each and outcome is EnqueueOutcome.ACCEPTED
        queue_bytes, total_bytes = queue_bytes + size_of_one, total_bytes + size_of_one
    assert admitted == each


def _evaluated(engine: sa.Engine, expression: sa.ColumnElement[Any], row: dict[str, Any], values: Any) -> Any:
    """`expression` over one message row, bound with `values`, the row rolled back afterwards."""
    with engine.connect() as connection:
        queue_id = connection.execute(sa.select(queues.c.id)).scalar_one()
        connection.execute(sa.insert(messages).values({**row, "queue_id": queue_id}))
        found = connection.execute(
            sa.select(expression).where(messages.c.lookup_id == row["lookup_id"]), values
        ).scalar_one()
        connection.rollback()
    return found


TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\0"), max_size=40)


@EXAMPLES
@given(
    body=st.binary(max_size=3 * 1024),
    extension=st.binary(max_size=64),
    label=TEXTS,
    admin_queue=st.one_of(st.none(), TEXTS),
    per_message=st.integers(0, 4096),
    text_character_bytes=st.integers(0, 8),
)
def test_the_sql_weight_of_a_message_is_the_budgets(
    engine: sa.Engine,
    body: bytes,
    extension: bytes,
    label: str,
    admin_queue: str | None,
    per_message: int,
    text_character_bytes: int,
) -> None:
    """PostgreSQL's receive claim weighs the first messages in SQL (statements.WEIGHT) to take
    only as many as one answer's budget holds: the weight must be the Python Budget's."""
    properties = MessageProperties(body=body, extension=extension, label=label, admin_queue=admin_queue or "")
    row = _row(properties)
    budget = Budget(1 << 30, per_message, text_character_bytes)
    texts = [row["label"], row["response_queue"], row["admin_queue"], row["destination_queue"]]
    # As statements.FOOTPRINT reads it: the stored body size (body and extension, as quotas count).
    footprint = Footprint(len(body) + len(extension), len(extension), sum(len(text or "") for text in texts))
    weighed = _evaluated(engine, statements.WEIGHT, row, statements.budget_values(budget))
    assert weighed == budget.weigh(footprint)
