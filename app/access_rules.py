"""The one table from every operation the gateway serves to the right it needs (qm.rights), and
where the queue it applies to is found. `app.authorization.Authorization` applies it to every
request; a route that is not in it is refused to everyone, so a new endpoint cannot go unguarded
(tests/integration/test_access_walk.py walks the OpenAPI document and the WSDL against it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from qm.rights import QueueManagerRight as M
from qm.rights import QueueRight as Q


class Locate(enum.Enum):
    """Where the queue a right applies to is found."""

    QUEUE_MANAGER = "queue manager"
    PATH = "the {path} of the URL"
    CURSOR = "the queue of the {cursor_id} of the URL"
    ROUTE = "the request body: the route checks (SOAP operations, a cursor's queue)"
    PUBLIC = "nowhere: no right needed"
    CALLER = "the caller itself: no right, only who it is (an anonymous caller too)"


@dataclass(frozen=True, slots=True)
class Rule:
    right: Q | M | None
    locate: Locate
    audited: bool = False
    """A change of state that is not message traffic: recorded in the audit log."""


def _qm(right: M, audited: bool = False) -> Rule:
    return Rule(right, Locate.QUEUE_MANAGER, audited)


def _queue(right: Q, audited: bool = False) -> Rule:
    return Rule(right, Locate.PATH, audited)


def _cursor(right: Q) -> Rule:
    return Rule(right, Locate.CURSOR)


PUBLIC = Rule(None, Locate.PUBLIC)
QUEUE = "/api/queues/{path:path}"
MESSAGES = QUEUE + "/messages"
CURSORS = "/api/cursors"

RULES: dict[tuple[str, str], Rule] = {
    # Documentation and health: nothing to protect (the WSDL describes, it does not act).
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    ("GET", "/docs/assets/{name}"): PUBLIC,
    # The console's page and assets: static files; what it then asks of the API is checked.
    ("GET", "/console"): PUBLIC,
    ("GET", "/console/"): PUBLIC,
    ("GET", "/console/assets/{name}"): PUBLIC,
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/livez"): PUBLIC,  # Kubernetes probes: they say whether, not what
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): _qm(M.READ_METRICS),
    ("GET", "/soap"): PUBLIC,
    ("POST", "/soap"): Rule(None, Locate.ROUTE),  # one right per SOAP operation: SOAP_RULES
    # Messages: MSMQ's own rights on the queue.
    ("POST", MESSAGES): _queue(Q.WRITE_MESSAGE),
    ("GET", MESSAGES): _queue(Q.PEEK_MESSAGE),
    ("GET", MESSAGES + "/first"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/first/receive"): _queue(Q.RECEIVE_MESSAGE),
    ("GET", MESSAGES + "/last"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/last/receive"): _queue(Q.RECEIVE_MESSAGE),
    ("GET", MESSAGES + "/by-id"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/by-id/receive"): _queue(Q.RECEIVE_MESSAGE),
    ("GET", MESSAGES + "/by-correlation-id"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/by-correlation-id/receive"): _queue(Q.RECEIVE_MESSAGE),
    ("GET", MESSAGES + "/{lookup_id}/next"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/{lookup_id}/next/receive"): _queue(Q.RECEIVE_MESSAGE),
    ("GET", MESSAGES + "/{lookup_id}/previous"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/{lookup_id}/previous/receive"): _queue(Q.RECEIVE_MESSAGE),
    ("GET", MESSAGES + "/{lookup_id}"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/{lookup_id}/receive"): _queue(Q.RECEIVE_MESSAGE),
    ("POST", QUEUE + "/receive"): _queue(Q.RECEIVE_MESSAGE),
    # Single-message administration (the console's): removing without reading is deleting; a
    # move or resend also needs WRITE_MESSAGE on each queue it writes to (checked by its route).
    ("DELETE", MESSAGES + "/{lookup_id}"): _queue(Q.DELETE_MESSAGE, audited=True),
    ("POST", MESSAGES + "/move"): _queue(Q.RECEIVE_MESSAGE, audited=True),
    ("POST", MESSAGES + "/resend"): _queue(Q.RECEIVE_MESSAGE, audited=True),
    ("GET", MESSAGES + "/export"): _queue(Q.PEEK_MESSAGE),
    ("POST", MESSAGES + "/import"): _queue(Q.WRITE_MESSAGE, audited=True),
    ("GET", QUEUE + "/peek"): _queue(Q.PEEK_MESSAGE),
    # Queues.
    ("GET", "/api/queues"): _qm(M.GET_PROPERTIES),
    ("POST", "/api/queues"): _qm(M.CREATE_QUEUE, audited=True),
    ("GET", QUEUE): _queue(Q.GET_PROPERTIES),
    ("PATCH", QUEUE): _queue(Q.SET_PROPERTIES, audited=True),
    ("DELETE", QUEUE): _queue(Q.DELETE, audited=True),
    ("POST", QUEUE + "/purge"): _queue(Q.DELETE_MESSAGE, audited=True),  # MQPurgeQueue: receive access
    # A queue's own security (MQGetQueueSecurity, MQSetQueueSecurity, its owner): its owner holds
    # GET_PERMISSIONS and CHANGE_PERMISSIONS without a grant (qm.queue_security).
    ("GET", QUEUE + "/permissions"): _queue(Q.GET_PERMISSIONS),
    ("POST", QUEUE + "/permissions"): _queue(Q.CHANGE_PERMISSIONS, audited=True),
    ("POST", QUEUE + "/owner"): _queue(Q.TAKE_OWNERSHIP, audited=True),
    # Handles whose secret ID only their holder was given: transactions and two-phase locks.
    ("POST", "/api/transactions"): _qm(M.TRANSACT),
    ("GET", "/api/transactions/{transaction_id}"): _qm(M.TRANSACT),
    ("POST", "/api/transactions/{transaction_id}/commit"): _qm(M.TRANSACT),
    ("POST", "/api/transactions/{transaction_id}/abort"): _qm(M.TRANSACT),
    ("POST", "/api/locks/{tag}/commit"): _qm(M.TRANSACT),
    ("POST", "/api/locks/{tag}/abort"): _qm(M.TRANSACT),
    # Cursors: opening one is peeking its queue (the route checks the queue in the body).
    ("POST", CURSORS): Rule(Q.PEEK_MESSAGE, Locate.ROUTE),
    ("GET", CURSORS + "/{cursor_id}"): _cursor(Q.PEEK_MESSAGE),
    ("DELETE", CURSORS + "/{cursor_id}"): _cursor(Q.PEEK_MESSAGE),
    ("GET", CURSORS + "/{cursor_id}/current"): _cursor(Q.PEEK_MESSAGE),
    ("GET", CURSORS + "/{cursor_id}/next"): _cursor(Q.PEEK_MESSAGE),
    ("POST", CURSORS + "/{cursor_id}/receive"): _cursor(Q.RECEIVE_MESSAGE),
    # The queue manager.
    ("GET", "/api/queue-manager"): _qm(M.GET_PROPERTIES),
    ("PATCH", "/api/queue-manager"): _qm(M.SET_PROPERTIES, audited=True),
    ("GET", "/api/srmp/statistics"): _qm(M.READ_METRICS),
    ("GET", "/api/outgoing-queues"): _qm(M.GET_PROPERTIES),
    ("GET", "/api/outgoing-queues/{queue_id}"): _qm(M.GET_PROPERTIES),
    ("POST", "/api/outgoing-queues/{queue_id}/pause"): _qm(M.MANAGE_OUTGOING, audited=True),
    ("POST", "/api/outgoing-queues/{queue_id}/resume"): _qm(M.MANAGE_OUTGOING, audited=True),
    ("POST", "/api/outgoing-queues/{queue_id}/purge"): _qm(M.MANAGE_OUTGOING, audited=True),
    ("DELETE", "/api/outgoing-queues/{queue_id}"): _qm(M.MANAGE_OUTGOING, audited=True),
    # Redrives the pipeline staged: re-sending dead letters an operator chose.
    ("GET", "/api/redrives/{batch_id}"): _qm(M.GET_PROPERTIES),
    ("POST", "/api/redrives/{batch_id}/apply"): _qm(M.RECEIVE_DEADLETTER_MESSAGE, audited=True),
    # Triggers and rules: reading them is reading the queue manager.
    ("GET", "/api/triggers"): _qm(M.GET_PROPERTIES),
    ("POST", "/api/triggers"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("GET", "/api/triggers/{trigger}"): _qm(M.GET_PROPERTIES),
    ("PUT", "/api/triggers/{trigger}"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("DELETE", "/api/triggers/{trigger}"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("PUT", "/api/triggers/{trigger}/rules"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("POST", "/api/triggers/{trigger}/rules/{rule}"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("DELETE", "/api/triggers/{trigger}/rules/{rule}"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("GET", "/api/triggers/{trigger}/invocations"): _qm(M.GET_PROPERTIES),
    ("GET", "/api/rules"): _qm(M.GET_PROPERTIES),
    ("POST", "/api/rules"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("GET", "/api/rules/{rule}"): _qm(M.GET_PROPERTIES),
    ("PUT", "/api/rules/{rule}"): _qm(M.MANAGE_TRIGGERS, audited=True),
    ("DELETE", "/api/rules/{rule}"): _qm(M.MANAGE_TRIGGERS, audited=True),
    # Principals, keys, grants and the audit log.
    ("GET", "/api/principals"): _qm(M.GET_PERMISSIONS),
    ("DELETE", "/api/principals/{name}"): _qm(M.CHANGE_PERMISSIONS, audited=True),
    ("GET", "/api/keys"): _qm(M.GET_PERMISSIONS),
    ("POST", "/api/keys"): _qm(M.CHANGE_PERMISSIONS, audited=True),
    ("DELETE", "/api/keys/{key_id}"): _qm(M.CHANGE_PERMISSIONS, audited=True),
    ("GET", "/api/grants"): _qm(M.GET_PERMISSIONS),
    ("POST", "/api/grants"): _qm(M.CHANGE_PERMISSIONS, audited=True),
    ("GET", "/api/client-certificates"): _qm(M.GET_PERMISSIONS),
    ("POST", "/api/client-certificates"): _qm(M.CHANGE_PERMISSIONS, audited=True),
    ("DELETE", "/api/client-certificates/{mapping_id}"): _qm(M.CHANGE_PERMISSIONS, audited=True),
    ("GET", "/api/audit"): _qm(M.READ_AUDIT),
    # Who the caller is and what it may do: what the console asks to show only allowed actions.
    ("GET", "/api/me"): Rule(None, Locate.CALLER),
    ("GET", "/api/me/rights"): Rule(None, Locate.CALLER),
}

SOAP_RULES: dict[str, tuple[Q | M, bool]] = {
    "Send": (Q.WRITE_MESSAGE, False),
    "Receive": (Q.RECEIVE_MESSAGE, False),
    "Peek": (Q.PEEK_MESSAGE, False),
    "ReceiveByLookupId": (Q.RECEIVE_MESSAGE, False),
    "PeekByLookupId": (Q.PEEK_MESSAGE, False),
    "CreateQueue": (M.CREATE_QUEUE, True),
    "GetQueue": (Q.GET_PROPERTIES, False),
    "ListQueues": (M.GET_PROPERTIES, False),
    "DeleteQueue": (Q.DELETE, True),
    "PurgeQueue": (Q.DELETE_MESSAGE, True),
    "BeginTransaction": (M.TRANSACT, False),
    "CommitTransaction": (M.TRANSACT, False),
    "AbortTransaction": (M.TRANSACT, False),
}
"""SOAP operation (the WSDL's names) -> its right and whether it is audited. A queue right
applies to the operation's queue element."""
