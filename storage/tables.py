"""The schema's message tables as SQLAlchemy Core: the queue manager, queues, messages and
what moves them (transactions, cursors, streams, outgoing queues, archive and redrive). The
trigger tables are in storage.trigger_tables, the access tables in storage.access_tables; all
share this `metadata`, complete only once those are imported too: storage.schema does that.
Migrations create the schema; tests check they agree.

Times are integer microseconds since 1970-01-01 UTC in both databases: exact, cheap to
index and compare, and free of SQLite's text-timestamp pitfalls.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
    }
)

message_counter = sa.Sequence("message_counter", metadata=metadata)
"""PostgreSQL's lookup-ID counter: never reused, never rolled back, no hot row."""

AVAILABLE = 0
LOCKED = 1
TXN_ENQUEUE = 1
TXN_DEQUEUE = 2

queue_manager = sa.Table(
    "queue_manager",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("guid", sa.String(36), nullable=False),
    sa.Column("quota_kb", sa.BigInteger, nullable=False),
    sa.Column("throttled", sa.Boolean, nullable=False),
    sa.Column("counter", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

queues = sa.Table(
    "queues",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("path_key", sa.String(700), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("name", sa.String(600), nullable=False),
    sa.Column("journal_of", sa.Integer, sa.ForeignKey("queues.id", ondelete="CASCADE"), nullable=True),
    sa.Column("label", sa.String(124), nullable=False),
    sa.Column("transactional", sa.Boolean, nullable=False),
    sa.Column("quota_kb", sa.BigInteger, nullable=False),
    sa.Column("journal", sa.Boolean, nullable=False),
    sa.Column("journal_quota_kb", sa.BigInteger, nullable=False),
    sa.Column("base_priority", sa.Integer, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("modified_at", sa.BigInteger, nullable=False),
    sa.Column("message_count", sa.BigInteger, nullable=False),
    sa.Column("byte_count", sa.BigInteger, nullable=False),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("lookup_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("queue_id", sa.Integer, sa.ForeignKey("queues.id", ondelete="CASCADE"), nullable=False),
    sa.Column("state", sa.SmallInteger, nullable=False),
    sa.Column("transaction_id", sa.String(64), nullable=True),
    sa.Column("txn_op", sa.SmallInteger, nullable=True),
    sa.Column("lock_tag", sa.String(64), nullable=True),
    sa.Column("lock_expires_at", sa.BigInteger, nullable=True),
    sa.Column("purge_pending", sa.Boolean, nullable=False),
    sa.Column("message_id", sa.String(100), nullable=False),
    sa.Column("correlation_id", sa.LargeBinary(20), nullable=True),
    sa.Column("label", sa.String(250), nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("body_size", sa.BigInteger, nullable=False),
    sa.Column("body_type", sa.Integer, nullable=False),
    sa.Column("priority", sa.SmallInteger, nullable=False),
    sa.Column("message_class", sa.Integer, nullable=False),
    sa.Column("app_specific", sa.BigInteger, nullable=False),
    sa.Column("extension", sa.LargeBinary, nullable=False),
    sa.Column("response_queue", sa.Text, nullable=True),
    sa.Column("admin_queue", sa.Text, nullable=True),
    sa.Column("acknowledge", sa.SmallInteger, nullable=False),
    sa.Column("journal", sa.SmallInteger, nullable=False),
    sa.Column("delivery", sa.SmallInteger, nullable=False),
    sa.Column("ttbr_seconds", sa.BigInteger, nullable=False),
    sa.Column("ttrq_seconds", sa.BigInteger, nullable=False),
    sa.Column("sent_time", sa.BigInteger, nullable=False),
    sa.Column("arrived_time", sa.BigInteger, nullable=False),
    sa.Column("source_machine", sa.String(36), nullable=False),
    sa.Column("ttbr_deadline", sa.BigInteger, nullable=True),
    sa.Column("ttrq_deadline", sa.BigInteger, nullable=True),
    sa.Column("first_in_xact", sa.Boolean, nullable=False),
    sa.Column("last_in_xact", sa.Boolean, nullable=False),
    sa.Column("abort_count", sa.Integer, nullable=False),
    sa.Column("destination_queue", sa.Text, nullable=True),
    sa.Column("transactional", sa.Boolean, nullable=False, server_default=sa.false()),
    # Facts kept on journal and dead-letter copies for the pipeline's export view (NULL: unknown).
    sa.Column("original_arrived_time", sa.BigInteger, nullable=True),
    sa.Column("received_time", sa.BigInteger, nullable=True),
    sa.Column("dead_lettered_time", sa.BigInteger, nullable=True),
    # The incoming SRMP stream the message arrived on and its ordinal there (its final receipt,
    # reference §4.4, goes to that stream's sender); on a final receipt in an outgoing queue,
    # the stream it reports on and the last ordinal its <streamReceipt> covers (migration 0007).
    sa.Column("srmp_stream_id", sa.String(200), nullable=True),
    sa.Column("srmp_ordinal", sa.BigInteger, nullable=True),
    # The anonymous SRMP sender's source address (IPv6: its /64), on whose account the outgoing
    # queues its acknowledgments and final receipts need are made (migration 0016).
    sa.Column("srmp_source", sa.String(64), nullable=True),
    # Queue order is (queue, priority DESC, arrival); the lookup ID's high byte is
    # 7 - priority, so (queue, state, lookup_id) serves that order exactly.
    sa.Index("ix_messages_receive_order", "queue_id", "state", "lookup_id"),
    sa.Index("ix_messages_ttbr_deadline", "ttbr_deadline"),
    sa.Index("ix_messages_ttrq_deadline", "ttrq_deadline"),
    sa.Index("ix_messages_message_id", "message_id"),
    sa.Index("ix_messages_correlation_id", "correlation_id"),
    sa.Index("ix_messages_transaction_id", "transaction_id"),
    sa.Index("ix_messages_lock_expires_at", "lock_expires_at"),
)

outbox = sa.Table(
    "outbox",
    metadata,
    sa.Column("lookup_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("reason", sa.String(32), primary_key=True),
    sa.Column("departed_at", sa.BigInteger, nullable=False),
    sa.Column("queue_kind", sa.String(16), nullable=False),
    sa.Column("queue_name", sa.String(600), nullable=False),
    sa.Column("queue_is_journal", sa.Boolean, nullable=False),
    sa.Column("queue_journal", sa.Boolean, nullable=False),
    *(sa.Column(c.name, c.type, nullable=c.nullable) for c in messages.c if c.name != "lookup_id"),
)
"""Messages removed whose consequences (journal copy, acknowledgment, final receipt) are not
placed yet: written by the statement that removed them, with their queue as it was then and
when they left (`departed_at`, for whoever looks at rows left over), and deleted by the
transaction that places those consequences (storage/outbox.py; migration 0017). A message
leaves once and arrives once, so its lookup ID and the reason (ARRIVED: a send, migration
0018) are the key that makes each placement happen once."""

transactions = sa.Table(
    "transactions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("first_ttbr_seconds", sa.BigInteger, nullable=True),
    sa.Index("ix_transactions_expires_at", "expires_at"),
)

received_message_ids = sa.Table(
    "received_message_ids",
    metadata,
    sa.Column("message_id", sa.String(200), primary_key=True),
    sa.Column("received_at", sa.BigInteger, nullable=False),
    sa.Index("ix_received_message_ids_received_at", "received_at"),
)
"""SRMP messages stored recently, for duplicate elimination (reference §1.7). `message_id` holds
the duplicate key qm.rules.duplicate_key makes of source queue manager, destination queue and
message ID (migration 0009; before it, the message ID alone)."""

cursors = sa.Table(
    "cursors",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("queue_id", sa.Integer, sa.ForeignKey("queues.id", ondelete="CASCADE"), nullable=False),
    sa.Column("place", sa.SmallInteger, nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Index("ix_cursors_expires_at", "expires_at"),
)

# The pipeline's ledgers (migration 0004). The pipeline writes the archive's and stages
# redrives with plain SQL; the gateway applies staged redrives (storage/redrives.py). The
# export view `message_export_v1` is created by that migration too (views are not part of
# this metadata).

archive_runs = sa.Table(
    "archive_runs",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("cutoff", sa.BigInteger, nullable=False),
    sa.Column("archive_path", sa.Text, nullable=False),
    sa.Column("body_mode", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("row_count", sa.BigInteger, nullable=True),
    sa.Column("checksum", sa.BigInteger, nullable=True),
    sa.Column("started_at", sa.BigInteger, nullable=False),
    sa.Column("finished_at", sa.BigInteger, nullable=True),
)
"""One row per archive run: claimed -> written -> deleted. A deleted run is never redone."""

archive_run_ids = sa.Table(
    "archive_run_ids",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("lookup_id", sa.BigInteger, primary_key=True, autoincrement=False),
)
"""Scratch: the lookup IDs read back from a run's archive, deleted from `messages` by ID."""

redrive_staging = sa.Table(
    "redrive_staging",
    metadata,
    sa.Column("batch_id", sa.String(64), nullable=False),
    sa.Column("source_lookup_id", sa.BigInteger, nullable=False),
    sa.Column("target_queue_id", sa.Integer, nullable=False),
    sa.Column("label", sa.String(250), nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("body_type", sa.Integer, nullable=False),
    sa.Column("priority", sa.SmallInteger, nullable=False),
    sa.Column("correlation_id", sa.LargeBinary(20), nullable=True),
    sa.Column("app_specific", sa.BigInteger, nullable=False),
    sa.Column("delivery", sa.SmallInteger, nullable=False),
    sa.Column("ttbr_seconds", sa.BigInteger, nullable=False),
    sa.Column("ttrq_seconds", sa.BigInteger, nullable=False),
    sa.Column("sent_time", sa.BigInteger, nullable=False),
    sa.Column("source_machine", sa.String(36), nullable=False),
    sa.Index("ix_redrive_staging_batch_id", "batch_id"),
)
"""Dead letters chosen for redrive, waiting to be merged; no constraints, so retries are harmless."""

redrive_ledger = sa.Table(
    "redrive_ledger",
    metadata,
    sa.Column("source_lookup_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("batch_id", sa.String(64), nullable=False),
    sa.Column("new_lookup_id", sa.BigInteger, nullable=False),
    sa.Column("target_queue_id", sa.Integer, nullable=False),
    sa.Column("redriven_at", sa.BigInteger, nullable=False),
)
"""Each dead letter redriven at most once: its lookup ID is the primary key. `new_lookup_id`
is 0 when the message was sent by an earlier attempt that crashed before recording it (its
duplicate key then made the retry a no-op)."""

redrive_batches = sa.Table(
    "redrive_batches",
    metadata,
    sa.Column("batch_id", sa.String(64), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("staged_count", sa.BigInteger, nullable=False),
    sa.Column("resent_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("skipped_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("staged_at", sa.BigInteger, nullable=False),
    sa.Column("finished_at", sa.BigInteger, nullable=True),
    sa.Index("ix_redrive_batches_status", "status"),
)
"""A staged redrive (migration 0011): staged -> applied | failed. Its staging rows are gone
once it is applied or failed."""

srmp_streams = sa.Table(
    "srmp_streams",
    metadata,
    sa.Column("stream_id", sa.String(200), primary_key=True),
    sa.Column("last_ordinal", sa.BigInteger, nullable=False),
    sa.Column("acknowledged_ordinal", sa.BigInteger, nullable=False),
    sa.Column("send_receipts_to", sa.Text, nullable=False),
    sa.Column("destination", sa.Text, nullable=False),
    sa.Column("first_unacknowledged_at", sa.BigInteger, nullable=True),
    sa.Column("receipt_due_at", sa.BigInteger, nullable=True),
    sa.Column("receipt_attempts", sa.Integer, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("sender", sa.String(200), nullable=True),
    sa.Index("ix_srmp_streams_receipt_due_at", "receipt_due_at"),
    sa.Index("ix_srmp_streams_sender", "sender"),
    sa.Index("ix_srmp_streams_updated_at", "updated_at"),
)
"""Incoming SRMP streams (reference §4.2): the last accepted ordinal, written in the same commit
as the message, and what the sender has been told. Kept after the queue goes: a sender may
resume a stream after a long outage; forgotten after MSMQGW_SRMP_STREAM_IDLE_S untouched with
nothing owed. `sender` (qm.streams.stream_sender, migration 0009) counts the streams of one
sender against MSMQGW_SRMP_MAX_STREAMS_PER_SENDER."""

outgoing_queues = sa.Table(
    "outgoing_queues",
    metadata,
    sa.Column("queue_id", sa.Integer, sa.ForeignKey("queues.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("last_attempt_at", sa.BigInteger, nullable=True),
    sa.Column("delivered_count", sa.BigInteger, nullable=False),
    sa.Column("owner", sa.String(200), nullable=True),
    sa.Column("lease_expires_at", sa.BigInteger, nullable=True),
    sa.Column("made_for", sa.String(64), nullable=True),
    sa.Index("ix_outgoing_queues_made_for", "made_for"),
)
"""Delivery state of each outgoing queue (one per remote SRMP destination URL), and which
gateway process sends it now: `owner` holds a lease until `lease_expires_at` (migration 0008).
`made_for`: the anonymous SRMP sender's source it was made for, counted against
MSMQGW_SRMP_MAX_OUTGOING_QUEUES_PER_SOURCE and MSMQGW_SRMP_MAX_OUTGOING_QUEUES; None when
a principal or the queue manager made it (migration 0016)."""

outgoing_streams = sa.Table(
    "outgoing_streams",
    metadata,
    sa.Column("queue_id", sa.Integer, sa.ForeignKey("queues.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("stream_id", sa.String(200), nullable=False, unique=True),
    sa.Column("next_ordinal", sa.BigInteger, nullable=False),
    sa.Column("acknowledged_ordinal", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)
"""The stream this gateway sends transactional messages on, one per outgoing queue (§4.1)."""

outgoing_stream_messages = sa.Table(
    "outgoing_stream_messages",
    metadata,
    sa.Column("lookup_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("queue_id", sa.Integer, sa.ForeignKey("queues.id", ondelete="CASCADE"), nullable=False),
    sa.Column("ordinal", sa.BigInteger, nullable=False),
    sa.Column("last_sent_at", sa.BigInteger, nullable=False),
    sa.Column("sends", sa.Integer, nullable=False),
    sa.Column("acknowledged_at", sa.BigInteger, nullable=True),
    sa.Index("ix_outgoing_stream_messages_queue_id_ordinal", "queue_id", "ordinal"),
)
"""A transactional message's place in its outgoing stream, from its first send until a stream
receipt covers it (it stays in its outgoing queue until then). A message that asked for
MQMSG_DEADLETTER stays after that too, `acknowledged_at` set and never resent, until its final
receipt (reference §4.4) says whether it goes to the transactional dead-letter queue."""
