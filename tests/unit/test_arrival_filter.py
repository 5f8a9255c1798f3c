"""The store skips building departures for arriving messages that cannot earn anything; the
quick test it uses must never say no where the full policy would place something."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from qm.disposal import Departure, DisposalPolicy, Reason
from qm.format_names import LocalIdentity
from qm.model import Message, MessageProperties
from qm.paths import QueueKind, QueuePath

OURS = uuid.UUID("8f8e5c52-3a40-4c5e-9c7e-0d1b2a3c4d5e")
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
POLICY = DisposalPolicy(LocalIdentity(OURS, frozenset({"gw01"})))
ADMIN_QUEUES = st.sampled_from(
    [
        None,
        "",
        r".\private$\acks",
        "DIRECT=OS:gw01\\private$\\acks",
        "DIRECT=HTTP://client01/msmq/private$/acks",
    ]
)


@given(
    journal=st.integers(0, 7),
    acknowledge=st.integers(0, 255),
    admin_queue=ADMIN_QUEUES,
    ours=st.booleans(),
    transactional=st.booleans(),
)
def test_the_quick_arrival_test_admits_every_message_the_policy_acts_on(
    journal: int, acknowledge: int, admin_queue: str | None, ours: bool, transactional: bool
) -> None:
    properties = MessageProperties(
        body=b"x", journal=journal, acknowledge=acknowledge, admin_queue=admin_queue or ""
    )
    message = Message(
        lookup_id=1,
        queue_id=1,
        message_id="{00000000-0000-0000-0000-000000000001}\\1",
        properties=properties,
        sent_time=NOW,
        arrived_time=NOW,
        source_machine=OURS if ours else uuid.uuid4(),
        ttbr_deadline=None,
        ttrq_deadline=None,
        first_in_transaction=False,
        last_in_transaction=False,
        abort_count=0,
    )
    departure = Departure(message, QueuePath(QueueKind.PRIVATE, "orders"), False, transactional)
    placed = POLICY.consequences(departure, Reason.ARRIVED, NOW)
    if placed:
        assert DisposalPolicy.arrival_may_place(journal, admin_queue, acknowledge)
