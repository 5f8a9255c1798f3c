"""A message's admin queue is a queue the gateway writes to on the sender's behalf: its
acknowledgments go there, and a negative one carries the original body and label. So naming
one needs WRITE_MESSAGE there too, checked before the message is taken: a principal that may
write only `private$/mine` otherwise put any body into `private$/victim` by sending to
`private$/mine` with `private$/victim` as admin queue and a one-second time-to-be-received.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import Request
from starlette.types import Scope

from app.auth import Security, authorize, srmp_refusal
from qm.errors import MqError
from qm.manager import QueueManager
from qm.model import MessageProperties
from qm.paths import QueueKind, QueuePath
from qm.rights import QueueRight


def acknowledged_in(manager: QueueManager, properties: MessageProperties) -> QueuePath | None:
    """The queue this message's acknowledgments would be placed in, as the queue manager
    places them (qm.disposal `acknowledgment_target`); None when it asks for none."""
    if not properties.admin_queue or not properties.acknowledge:
        return None
    try:
        target = manager.destination(properties.admin_queue)
    except MqError:
        return None  # names no queue: no acknowledgment can go anywhere
    if target.writable or target.kind is QueueKind.OUTGOING:
        return target
    return None  # system queues and journals take no acknowledgments


async def authorize_admin_queues(request: Request, messages: Iterable[MessageProperties]) -> None:
    """MQ_ERROR_ACCESS_DENIED unless the caller may write to each message's admin queue."""
    manager: QueueManager = request.app.state.gateway.manager
    for properties in messages:
        if acknowledged_in(manager, properties) is not None:
            assert properties.admin_queue is not None
            await authorize(request, QueueRight.WRITE_MESSAGE, properties.admin_queue)


async def srmp_admin_queue_refused(
    security: Security, manager: QueueManager, scope: Scope, properties: MessageProperties
) -> QueuePath | None:
    """The local admin queue the SRMP sender (anonymous, or by its client certificate) may not
    write to, or None. A remote one
    is an outgoing queue, bounded by the outbound allow-list (MSMQGW_SRMP_OUTBOUND_HOSTS)."""
    target = acknowledged_in(manager, properties)
    if target is None or target.kind is QueueKind.OUTGOING:
        return None
    return None if await srmp_refusal(security, scope, target) is None else target
