"""The peer: RabbitMQ on 127.0.0.1:5672 through aio-pika, with the same durability promise.

A durable queue, persistent 1 KB messages, publisher confirms (a publish returns once the
broker has the message on disk) and consumer acknowledgments; the same producer and
consumer concurrency as the gateway's end-to-end scenario.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from bench.harness import listening
from bench.requests import body

RABBITMQ_URL = os.environ.get("MSMQGW_BENCH_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672/")
CONSUMER_PREFETCH = 1
"""One unacknowledged message per consumer: what one long-polling receive holds."""


def rabbitmq_up() -> bool:
    return listening(5672)


async def end_to_end(seconds: float, producers: int, consumers: int) -> dict[str, float]:
    """Producers publish for `seconds` while consumers receive and ack; the rate is everything
    published over the time until the last of it was acknowledged by a consumer."""
    import aio_pika

    connection = await aio_pika.connect_robust(RABBITMQ_URL)
    name = f"msmqgw-bench-{uuid.uuid4().hex[:8]}"
    try:
        setup = await connection.channel()
        queue = await setup.declare_queue(name, durable=True)
        payload = body()
        published = 0
        received = 0
        publishing_over = False
        everything = asyncio.Event()
        last_received = 0.0

        async def consume() -> None:
            nonlocal received, last_received
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=CONSUMER_PREFETCH)
            own = await channel.get_queue(name)
            async with own.iterator() as stream:
                async for message in stream:
                    await message.ack()
                    received += 1
                    last_received = time.perf_counter()
                    if publishing_over and received >= published:
                        everything.set()

        async def produce(deadline: float) -> None:
            nonlocal published
            channel = await connection.channel(publisher_confirms=True)
            while time.perf_counter() < deadline:
                await channel.default_exchange.publish(
                    aio_pika.Message(payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=name,
                )
                published += 1

        consumer_tasks = [asyncio.create_task(consume()) for _ in range(consumers)]
        started = time.perf_counter()
        await asyncio.gather(*(produce(started + seconds) for _ in range(producers)))
        publishing_over = True
        if received < published:
            await asyncio.wait_for(everything.wait(), timeout=120)
        elapsed = max(last_received, started + seconds) - started
        for task in consumer_tasks:
            task.cancel()
        await asyncio.gather(*consumer_tasks, return_exceptions=True)
        await queue.delete(if_unused=False, if_empty=False)
        return {"messages": published, "elapsed_s": elapsed, "per_s": published / elapsed}
    finally:
        await connection.close()
