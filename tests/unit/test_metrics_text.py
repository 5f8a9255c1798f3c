"""The store's gauges as text: names chosen by remote senders cannot break the format."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from app.metrics import render_store
from qm.paths import QueueKind, SystemQueue
from storage.observation import DeadLetters, Observation, OutgoingTotals, QueueTotals

HOSTILE_URL = 'HTTP://evil.example/msmq/private$/a"} 1\nmsmqgw_injected{x="\\'


def test_hostile_names_are_escaped_and_read_back_as_they_are() -> None:
    observed = Observation(
        queues=[QueueTotals(QueueKind.PRIVATE, "zürich", 3, 30, 1, 10)],
        dead_letters=[
            DeadLetters(SystemQueue.DEADXACT, 0xC000, 2),
            DeadLetters(SystemQueue.DEADLETTER, 0x8999, 1),
        ],
        outgoing=[OutgoingTotals(HOSTILE_URL, 4, 40, False, 2, 1_000_000, 17)],
        receipts_owed=0,
    )

    text = render_store(observed, now_s=61.0, pool_size=20).decode()

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert not any(name == "msmqgw_injected" for name, _ in samples)
    assert samples[("msmqgw_messages_in_queue", (("name", "private$\\zürich"),))] == 3
    assert samples[("msmqgw_bytes_in_journal_queue", (("name", "private$\\zürich"),))] == 10
    outgoing = "DIRECT=" + HOSTILE_URL
    assert samples[("msmqgw_outgoing_messages", (("name", outgoing),))] == 4
    assert samples[("msmqgw_outgoing_retries", (("name", outgoing),))] == 2
    assert samples[("msmqgw_outgoing_delivered_total", (("name", outgoing),))] == 17
    assert samples[("msmqgw_outgoing_oldest_message_age_seconds", (("name", outgoing),))] == 60.0
    assert samples[("msmqgw_outgoing_state", (("name", outgoing), ("state", "waiting-to-connect")))] == 1
    assert samples[("msmqgw_outgoing_state", (("name", outgoing), ("state", "connected")))] == 0
    dead = "msmqgw_dead_letters"
    assert samples[(dead, (("class", "NACK_Q_DELETED"), ("queue", "system$;deadxact")))] == 2
    assert samples[(dead, (("class", "0x8999"), ("queue", "system$;deadletter")))] == 1
