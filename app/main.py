"""The composition root: create_app(settings) builds everything in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from app import edge, errors, openapi, parameters
from app.auth import Security, check_exposure, prune_audit_pass
from app.authorization import Authorization
from app.client_certs import CertificateMapper
from app.configs import group_commit_config, manager_config
from app.gateway import Gateway
from app.housekeeping import background_tasks, supervise, supervise_on_demand
from app.keys import KeyVerifier
from app.metrics import ProcessMetrics, exposition, forget_process
from app.metrics_port import serve_metrics
from app.observed import Observed, json_request_log
from app.outbound.client import SrmpClient, outbound_verification
from app.outbound.delivery import OutgoingDelivery
from app.outbound.receipts import StreamReceiptSender
from app.routes import (
    access,
    administration,
    client_certificates,
    console,
    cursors,
    docs_ui,
    fast_messages,
    lookup,
    messages,
    operations,
    outgoing,
    queue_manager,
    queue_permissions,
    queues,
    redrives,
    soap_api,
    srmp,
    transactions,
    triggers,
)
from app.settings import Settings, load_settings
from app.trigger_actions import TriggerRuntime
from qm.access import AccessControl
from qm.clock import Clock, SystemClock
from qm.cursors import CursorService
from qm.manager import QueueManager
from qm.outgoing import OutgoingQueues
from qm.reading import QueueReader
from storage.engine import make_engine, pool_size, watch_pool
from storage.migrate import head_revision
from storage.store import SqlStore
from storage.wakeups import make_wakeups

DESCRIPTION = """\
MSMQ's queue manager over HTTP: queues, priority-ordered messages with 64-bit lookup IDs,
receive and peek with waits, cursors, lookup-ID navigation, transactions and two-phase
reads. Errors are `application/problem+json` carrying the MQ_ERROR name and hex code.
Lookup IDs are decimal strings. Queue paths appear in URLs as `private$/name` or `name`.
"""
AUDIT_PRUNE_INTERVAL_S = 3600.0
"""How often audit entries past MSMQGW_AUDIT_RETENTION_DAYS are pruned."""


def process_name() -> str:
    """`host:pid:random`: names this process as the owner of outgoing queue leases."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{secrets.token_hex(4)}"


def settle_heap() -> None:
    """Put what start-up allocated (mostly the libraries' own objects, about 100,000) out of
    the cyclic collector's reach. A full collection then walks only what requests allocate:
    measured 49 ms before and 5 ms after, a stall that otherwise hit every few hundred
    requests. Reference counting still frees those objects as usual.

    Once per process: a later app in the same process (the tests start hundreds) would put
    the garbage of the ones before out of reach for good, and collect a growing heap first."""
    if gc.get_freeze_count():
        return
    gc.collect()
    gc.freeze()


def create_app(settings: Settings | None = None, clock: Clock | None = None) -> FastAPI:
    settings = settings or load_settings()
    check_exposure(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = SqlStore(
            make_engine(settings.database_url, driver_sql=settings.driver_sql), group_commit_config(settings)
        )
        wakeups = make_wakeups(settings.database_url, settings.wake_poll_interval_s)
        await wakeups.start()
        manager = QueueManager(store, wakeups, clock or SystemClock(), manager_config(settings))
        await manager.start()
        client = SrmpClient(settings.srmp_send_timeout_s, outbound_verification(settings.outbound_ca_file))
        receipts = StreamReceiptSender(
            manager, client, settings.srmp_timer_mapping, app.state.metrics.stream_receipt
        )
        outgoing_queues = OutgoingQueues(manager, process_name())
        app.state.gateway = Gateway(
            settings,
            manager,
            QueueReader(manager),
            CursorService(manager),
            outgoing_queues,
            metrics=app.state.metrics,
        )
        delivery = OutgoingDelivery(outgoing_queues, client, settings.srmp_timer_mapping)
        tasks = background_tasks(manager, settings.housekeeping_interval_s, settings.sweep_interval_s)
        interval_s = settings.srmp_send_interval_s
        senders = (("stream receipts", receipts.send_due), ("outgoing queues", delivery.send_due))
        for name, one_pass in senders:
            supervised = supervise_on_demand(name, one_pass, interval_s, manager.outbound_work)
            tasks.append(asyncio.create_task(supervised, name=name))
        redrive_pass = supervise("redrives", manager.redrives.apply_pending, settings.redrive_interval_s)
        tasks.append(asyncio.create_task(redrive_pass, name="redrives"))
        app.state.triggers = TriggerRuntime(manager, store, settings)
        app.state.trigger_admin = app.state.triggers.admin
        access = AccessControl(store.access, manager.clock, settings.auth_cache_ttl_s)
        keys = KeyVerifier(store.access, settings.auth_cache_ttl_s)
        certificates = CertificateMapper(store.access, settings.auth_cache_ttl_s)
        app.state.security = Security(settings, keys, access, certificates, settings.source_networks())
        prune = supervise("audit pruning", lambda: prune_audit_pass(access, settings), AUDIT_PRUNE_INTERVAL_S)
        tasks.append(asyncio.create_task(prune, name="audit pruning"))
        trigger_task = app.state.triggers.task
        app.state.operations = observe(app, store, [*tasks, *([trigger_task] if trigger_task else [])])
        metrics_server = await separate_metrics_port(settings, app.state.operations)
        settle_heap()
        try:
            yield
        finally:
            if metrics_server is not None:
                metrics_server.close()
            await app.state.triggers.close()
            forget_process()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await client.close()
            await wakeups.close()
            await store.close()

    app = FastAPI(
        title="msmq-gateway",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by docs_ui from the package's own assets
        redoc_url=None,
    )
    errors.install(app)
    app.state.metrics = ProcessMetrics()
    # Inside the SRMP layer (the last added is the outermost): a virtual directory named like
    # the REST prefix keeps taking those requests, as before. Its check costs under a microsecond.
    app.add_middleware(fast_messages.FastMessages, application=app)
    app.add_middleware(parameters.TextInUrl)  # before the fast layer: no NUL reaches a route
    # Outside the fast layer, so that every REST request is checked (app/access_rules.py).
    app.add_middleware(Authorization, application=app)
    app.add_middleware(srmp.SrmpRequestTarget, virtual_directory=settings.srmp_virtual_directory)
    # A request with a foreign Host, from another site's page or with a body type its endpoint
    # does not read is refused before the routes see it.
    app.add_middleware(edge.Edge, settings=settings)
    # Outermost: it times and counts every request, those the edge refuses and the SRMP and
    # fast REST paths included.
    app.add_middleware(
        Observed,
        metrics=app.state.metrics,
        srmp_directory=settings.srmp_virtual_directory,
        log_requests=settings.request_log == "json",
    )
    if settings.request_log == "json":
        json_request_log()
    openapi.install(app, srmp.SRMP_OPENAPI)
    # Matching walks the routes in order: the busiest (send, receive) first. Lookup before
    # receive and peek: `{path:path}/receive` would also match `.../messages/first/receive`.
    # Routes on `/api/queues/{path}` itself match anything, so they come last.
    for router in (
        messages.send_router,
        administration.router,
        lookup.router,
        messages.router,
        messages.locks_router,
        queue_manager.router,
        transactions.router,
        cursors.router,
        triggers.router,
        triggers.rules_router,
        queues.router,
        outgoing.router,
        access.router,
        client_certificates.router,
        queue_permissions.router,
        redrives.router,
        srmp.router,
        soap_api.router,
        docs_ui.router,
        console.router,
        operations.router,
        *([operations.metrics_router] if settings.metrics_port is None else []),
    ):
        add_routes(app, router)
    queues.register_item_routes(app.router)
    return app


def observe(app: FastAPI, store: SqlStore, tasks: list[asyncio.Task[None]]) -> operations.Operations:
    """Connect the store's events to the process metrics; what /metrics and /readyz read."""
    metrics: ProcessMetrics = app.state.metrics
    sender, receiver = store.messages.sender.group_commit, store.messages.receiver.receive_group
    sender.on_batch = metrics.group_commit_batch.labels("send").observe
    receiver.on_batch = metrics.group_commit_batch.labels("receive").observe
    store.triggers.on_invocation(
        lambda invocation: metrics.trigger_invocations.labels(invocation.outcome).inc()
    )
    store.db.on_dropped(metrics.dropped)
    watch_pool(store.engine, metrics.db_connections_in_use.inc)
    return operations.Operations(metrics, store.observation, pool_size(store.engine), head_revision(), tasks)


async def separate_metrics_port(settings: Settings, ops: operations.Operations) -> asyncio.Server | None:
    if settings.metrics_port is None:
        return None
    return await serve_metrics(
        settings.host,
        settings.metrics_port,
        lambda: exposition(ops.metrics, ops.observation, ops.pool_size),
        edge.allowed_hosts(settings),
    )


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """Put the router's path operations on the app's own route list, in their order.

    Since FastAPI 0.137, `include_router` keeps each router as one node that every request
    walks again (and matches twice): about 150 us a request with our dozen routers. Our routers
    are plain lists of path operations, declared with their prefix and tags and included with
    no options, so their routes are already final and can be served as they are. Relies on
    `APIRouter.routes` being the list the router matches against, in order (checked by
    tests/unit/test_routing.py); `app.dependency_overrides` does not reach routes added so.
    """
    for route in router.routes:
        if not isinstance(route, APIRoute):  # a nested router or a mount needs include_router
            raise TypeError(f"{route!r} is not a path operation")
        app.router.routes.append(route)
