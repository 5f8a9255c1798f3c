"""One trigger's walk through its queue, and what each processing type does to a message."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from datetime import datetime
from typing import TYPE_CHECKING

from qm.cursors import Arrivals
from qm.disposal import Departure, DisposalPolicy, Placement, PlacementKind, Reason
from qm.errors import MqError
from qm.model import Message, Queue
from qm.paths import SystemQueue, system_queue_path
from qm.rules import counter_of
from qm.store import Seek
from qm.triggers.actions import ActionFailed, parameters
from qm.triggers.conditions import holds_all
from qm.triggers.model import Invocation, Outcome, ProcessingType, Rule, Trigger

if TYPE_CHECKING:
    from qm.triggers.service import TriggerService

log = logging.getLogger(__name__)
PEEK_ONCE_PRUNE_AT = 10_000


class TriggerWalker:
    def __init__(self, service: TriggerService, trigger: Trigger, rules: tuple[Rule, ...]) -> None:
        self._service = service
        self._qm = service.manager
        self._config = service.config
        self._trigger = trigger
        self._rules = rules
        self._slots = asyncio.Semaphore(1 if trigger.serialized else max(1, self._config.concurrency))
        self._tasks: set[asyncio.Task[None]] = set()
        self._done: set[int] = set()
        self._returned: asyncio.Queue[int] = asyncio.Queue()
        self._waiting_at_end = False
        self._cursor_id = ""
        self._jumped = False
        self._arrivals = Arrivals(0)

    async def run(self) -> None:
        queue = await self._qm.get_queue(self._trigger.queue)
        cursor = await self._service.cursors.open(self._trigger.queue)
        self._cursor_id = cursor.id
        try:
            await self._walk(queue)
        finally:
            # Let actions in flight finish (bounded by the action budget), so a retrieval
            # ends its lock or transaction now rather than when it times out.
            await asyncio.shield(asyncio.gather(*self._tasks, return_exceptions=True))
            with contextlib.suppress(Exception):
                await self._service.cursors.close(cursor.id)

    async def _walk(self, queue: Queue) -> None:
        positioned = False
        self._arrivals = Arrivals(await self._qm.store.messages.counter_high_water())
        while True:
            message = await self._next(positioned)
            if message is None:
                continue
            positioned = True
            self._met(message.lookup_id)
            if not (self._config.peek_once and message.lookup_id in self._done):
                self._remember(message.lookup_id)
                await self._dispatch(queue, message)
                # From here the walker only looks further: an abort now meets it at the end.
                self._waiting_at_end = self._loops_on_aborts()
            await self._follow_arrivals(queue, message.lookup_id)

    async def _follow_arrivals(self, queue: Queue, position: int) -> None:
        """The seed: a message that arrived while the trigger was busy is processed next
        wherever it landed (a resting cursor alone would miss it): one of higher priority,
        or one whose send committed after later messages' (a transaction, another process).

        An arrival is a message above the walk's settled counter that the walk has not met.
        With none behind the cursor, the counter moves up to a newly settled one (read before
        looking, so that nothing settled in between is passed over)."""
        settled = await self._qm.store.messages.counter_high_water()
        ahead = await self._qm.store.messages.peek(queue.id, self._arrivals.selector(), self._qm.clock.now())
        if ahead is not None and ahead.lookup_id < position:
            await self._service.cursors.move_to(self._cursor_id, ahead.lookup_id)
            self._jumped = True
        elif settled > self._arrivals.counter:
            known = frozenset(seen for seen in self._arrivals.known if counter_of(seen) > settled)
            self._arrivals = Arrivals(settled, known)

    def _met(self, lookup_id: int) -> None:
        """A message the walk has met is no arrival any more."""
        if counter_of(lookup_id) > self._arrivals.counter:
            self._arrivals = Arrivals(self._arrivals.counter, self._arrivals.known | {lookup_id})

    def _remember(self, lookup_id: int) -> None:
        """The cursor never goes back below where it stands, so older entries can go."""
        if not self._config.peek_once:
            return
        self._done.add(lookup_id)
        if len(self._done) > PEEK_ONCE_PRUNE_AT:
            self._done = {seen for seen in self._done if seen >= lookup_id}

    async def _next(self, positioned: bool) -> Message | None:
        cursors, wait_ms = self._service.cursors, self._config.wait_ms
        if self._jumped:
            self._jumped = False
            try:
                return await cursors.peek_current(self._cursor_id, 0)
            except MqError:
                pass  # taken meanwhile: go on from there
        read = cursors.peek_next if positioned else cursors.peek_current
        if not self._loops_on_aborts():
            return await read(self._cursor_id, wait_ms, self._arrivals)
        # The seed's cursor rule: while the cursor waits at the end, a message that an
        # aborted receive put back counts as an arrival, so the trigger meets it again.
        self._waiting_at_end = True
        peeking = asyncio.ensure_future(read(self._cursor_id, wait_ms, self._arrivals))
        returned = asyncio.ensure_future(self._returned.get())
        try:
            await asyncio.wait({peeking, returned}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Neither wait outlives this call, a walker being stopped included: a cursor
            # wait left behind goes on reading (and moving) a cursor its walker closed.
            returned.cancel()
            peeking.cancel()
            await asyncio.wait({peeking})
        if returned.done() and not returned.cancelled():
            if peeking.cancelled():
                self._waiting_at_end = False
                return await self._peek_by_lookup_id(returned.result())
            self._returned.put_nowait(returned.result())  # both at once: meet it next
        message = peeking.result()
        self._waiting_at_end = message is None
        return message

    def _loops_on_aborts(self) -> bool:
        return (
            self._trigger.processing is ProcessingType.TRANSACTIONAL_RETRIEVAL
            and not self._trigger.serialized
        )

    async def _peek_by_lookup_id(self, lookup_id: int) -> Message | None:
        try:
            return await self._service.reader.by_lookup_id(self._trigger.queue, Seek.CURRENT, lookup_id)
        except MqError:
            return None  # taken meanwhile

    async def _dispatch(self, queue: Queue, message: Message) -> None:
        """Serialized: handle it before looking further. Otherwise: up to the concurrency
        limit at once, in the order the cursor met them."""
        await self._slots.acquire()
        if self._trigger.serialized:
            try:
                await self._handle(queue, message)
            finally:
                self._slots.release()
            return
        task = asyncio.create_task(self._handle_in_background(queue, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle_in_background(self, queue: Queue, message: Message) -> None:
        try:
            await self._handle(queue, message)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("trigger %s: message %d failed", self._trigger.name, message.lookup_id)
        finally:
            self._slots.release()

    async def _handle(self, queue: Queue, message: Message) -> None:
        fired = [rule for rule in self._rules if holds_all(rule.conditions, message)]
        if not fired:
            return
        processing = self._trigger.processing
        if processing is ProcessingType.PEEK:
            for rule in fired:
                await self._invoke(rule, message)
        elif processing is ProcessingType.RETRIEVAL:
            await self._retrieve(message, fired)
        else:
            await self._retrieve_in_transaction(queue, message, fired)

    async def _invoke_all(self, rules: list[Rule], message: Message) -> bool:
        """In attached order, stopping at the first failure (the message stays for a retry)."""
        for rule in rules:
            if not await self._invoke(rule, message):
                return False
        return True

    async def _retrieve(self, message: Message, fired: list[Rule]) -> None:
        """Lock the message (the process that wins the lock acts), act, then receive it on
        success or unlock it. A crash leaves the lock to expire: the message comes back."""
        budget = self._config.action_budget_s(len(fired)) + 5.0
        lock_s = min(budget, self._qm.config.max_lock_timeout_s)
        locked = await self._service.reader.lock_by_lookup_id(self._trigger.queue, message.lookup_id, lock_s)
        if locked is None:
            return  # another process or client took it
        held, tag = locked
        succeeded = await self._invoke_all(fired, held)
        try:
            await self._service.reader.end_lock(tag, commit=succeeded)
        except MqError as error:
            log.warning("trigger %s: message %d: %s", self._trigger.name, held.lookup_id, error)

    async def _retrieve_in_transaction(self, queue: Queue, message: Message, fired: list[Rule]) -> None:
        transaction = await self._qm.begin_transaction()
        try:
            held = await self._service.reader.by_lookup_id(
                self._trigger.queue, Seek.CURRENT, message.lookup_id, receive=True, transaction=transaction.id
            )
        except MqError:
            await self._qm.abort(transaction.id)
            return  # another process or client took it
        succeeded = await self._invoke_all(fired, held)
        try:
            await (self._qm.commit if succeeded else self._qm.abort)(transaction.id)
        except MqError as error:  # timed out meanwhile: the housekeeping aborted it
            log.warning("trigger %s: message %d: %s", self._trigger.name, held.lookup_id, error)
            succeeded = False
        if succeeded:
            return
        limit = self._config.attempt_limit
        if limit and held.abort_count + 1 >= limit:
            await self._reject(queue, held)
        elif self._waiting_at_end:
            self._returned.put_nowait(held.lookup_id)

    async def _reject(self, queue: Queue, message: Message) -> None:
        """The attempt limit: to the dead-letter queue with class NACK_RECEIVE_REJECTED."""
        now = self._qm.clock.now()
        placements = rejection(self._qm.policy, queue, message, now)
        error = f"moved to the dead-letter queue after {message.abort_count + 1} failed attempts"
        entry = self._entry(None, message, Outcome.DEAD_LETTERED, 0.0, 0, error)
        await self._service.store.reject_message(queue.id, message.lookup_id, placements, now, entry)

    async def _invoke(self, rule: Rule, message: Message) -> bool:
        """Run the rule's action with retries and backoff; log one invocation entry."""
        values = parameters(message, self._trigger, rule)
        loop = asyncio.get_running_loop()
        started = loop.time()
        config, error, attempt = self._config, None, 0
        for attempt in range(1, config.action_retries + 2):
            error = await self._attempt(rule, values)
            if error is None or attempt > config.action_retries:
                break
            await asyncio.sleep(config.retry_backoff_s * 2 ** (attempt - 1))
        outcome = Outcome.SUCCESS if error is None else Outcome.FAILURE
        await self._log(rule, message, outcome, (loop.time() - started) * 1000, attempt, error)
        return error is None

    async def _attempt(self, rule: Rule, values: dict[str, str]) -> str | None:
        await self._service.runner.prepare(rule.action)  # outside the action's time limit
        try:
            async with asyncio.timeout(self._config.action_timeout_s):
                await self._service.runner.run(rule.action, values)
        except ActionFailed as failure:
            return str(failure)
        except TimeoutError:
            return f"no answer within {self._config.action_timeout_s} s"
        return None

    async def _log(
        self,
        rule: Rule | None,
        message: Message,
        outcome: Outcome,
        duration_ms: float,
        attempts: int,
        error: str | None,
    ) -> None:
        entry = self._entry(rule, message, outcome, duration_ms, attempts, error)
        await self._service.store.add_invocation(entry)

    def _entry(
        self,
        rule: Rule | None,
        message: Message,
        outcome: Outcome,
        duration_ms: float,
        attempts: int,
        error: str | None,
    ) -> Invocation:
        return Invocation(
            trigger_id=self._trigger.id,
            rule_id="" if rule is None else rule.id,
            rule_name="" if rule is None else rule.name,
            lookup_id=message.lookup_id,
            message_id=message.message_id,
            at=self._qm.clock.now(),
            outcome=outcome,
            duration_ms=round(duration_ms, 3),
            attempts=attempts,
            error=error,
        )


def rejection(policy: DisposalPolicy, queue: Queue, message: Message, now: datetime) -> list[Placement]:
    """A dead-letter copy with class NACK_RECEIVE_REJECTED (0xC004) whatever the message's
    journal flags say (the trigger removes it: it must land somewhere), plus the negative
    acknowledgment the sender asked for. Transactional queues: the transactional
    dead-letter queue."""
    target = SystemQueue.DEADXACT if queue.settings.transactional else SystemQueue.DEADLETTER
    properties = dataclasses.replace(message.properties, message_class=Reason.REJECTED.value)
    copy = Placement(
        PlacementKind.DEAD_LETTER,
        system_queue_path(target),
        properties,
        message.message_id,
        message.sent_time,
        message.source_machine,
        queue.path.pathname,
        on_behalf_of=message.srmp_source,
    )
    departure = Departure(message, queue.path, queue.settings.journal, queue.settings.transactional)
    others = policy.consequences(departure, Reason.REJECTED, now)
    return [copy, *(placement for placement in others if placement.kind is not PlacementKind.DEAD_LETTER)]
