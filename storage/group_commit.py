"""Group commit: concurrent enqueues coalesced into one transaction and one fsync.

Durable messaging is bounded by the commit (an fsync), not by the statements: a commit of
a hundred messages costs about what a commit of one does. So callers that arrive while a
commit is under way wait together and are written by the next transaction, and each is
answered only once that transaction has committed. Nothing is acknowledged early.

Bounds: at most `max_batch` requests per transaction; `max_wait_s` (default 0) is how long
a transaction may wait for company before it starts. With 0, a batch is what queued up
during the previous commit, so a lone caller pays no extra latency.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")

BatchRunner = Callable[[Sequence[Request]], Awaitable[Sequence[Result | BaseException]]]
"""Runs requests in one transaction; returns each request's result or the error that is its
own alone (the others still commit). Raises when the transaction as a whole failed."""


@dataclass(frozen=True, slots=True)
class GroupCommitConfig:
    max_batch: int = 256
    """Requests per transaction at most."""
    max_wait_s: float = 0.0
    """How long a transaction may wait for company before it starts."""
    relaxed_express: bool = True
    """A batch of express messages only commits without waiting for the disk (MSMQ's
    express delivery: lost in a crash of the machine or database server)."""


@dataclass
class GroupCommitStats:
    commits: int = 0
    """Transactions that committed a batch."""
    requests: int = 0
    """Requests answered from committed batches."""
    largest: int = 0


class GroupCommit(Generic[Request, Result]):
    """One writer loop per store: callers queue, the loop commits them in batches."""

    def __init__(self, run: BatchRunner[Request, Result], max_batch: int, max_wait_s: float) -> None:
        self._run = run
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._pending: list[tuple[Request, asyncio.Future[Result]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.stats = GroupCommitStats()
        self.on_batch: Callable[[int], None] | None = None
        """Told the size of each batch committed (the gateway's metrics)."""

    async def submit(self, request: Request) -> Result:
        """Queue `request`; return its result once the transaction holding it has committed."""
        answer: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((request, answer))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        return await answer

    async def _write(self) -> None:
        while self._pending:
            if self._max_wait_s > 0 and len(self._pending) < self._max_batch:
                await asyncio.sleep(self._max_wait_s)  # a bounded wait for company, not synchronisation
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            batch = [(request, answer) for request, answer in batch if not answer.done()]
            if batch:  # a caller cancelled before its batch began is left out of it
                await self._commit(batch)

    async def _commit(self, batch: list[tuple[Request, asyncio.Future[Result]]]) -> None:
        try:
            outcomes = await self._run([request for request, _ in batch])
        except Exception as error:  # the whole transaction failed: every caller gets the error
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(error)
            return
        except BaseException as error:  # cancelled (shutdown): nobody may think it committed
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(error if isinstance(error, Exception) else asyncio.CancelledError())
            raise
        self.stats.commits += 1
        self.stats.requests += len(batch)
        self.stats.largest = max(self.stats.largest, len(batch))
        if self.on_batch is not None:
            self.on_batch(len(batch))
        for (_, answer), outcome in zip(batch, outcomes, strict=True):
            if answer.done():
                continue  # the caller went away; its message is stored all the same
            if isinstance(outcome, BaseException):
                answer.set_exception(outcome)
            else:
                answer.set_result(outcome)

    async def close(self) -> None:
        """Let the batch under way finish (its callers are owed an answer)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer
