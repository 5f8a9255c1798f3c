"""The settings made into each part's configuration: the queue manager's (qm.config), the
Message Queuing Triggers service's and its allow-list, group commit's (storage.group_commit).
app.settings holds and validates the values; this is what they mean to the parts."""

from __future__ import annotations

from app.settings import Settings, comma_separated
from qm.config import ManagerConfig
from qm.triggers.actions import AllowList
from qm.triggers.model import TriggerConfig
from storage.group_commit import GroupCommitConfig

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "."})


def manager_config(settings: Settings) -> ManagerConfig:
    return ManagerConfig(
        max_body_bytes=settings.max_body_bytes,
        initial_quota_kb=settings.initial_quota_kb,
        transaction_timeout_s=settings.transaction_timeout_s,
        cursor_idle_timeout_s=settings.cursor_idle_timeout_s,
        default_lock_timeout_s=settings.default_lock_timeout_s,
        max_lock_timeout_s=settings.max_lock_timeout_s,
        local_host_names=frozenset(
            name.strip().casefold() for name in settings.local_host_names.split(",") if name.strip()
        ),
        transaction_ttbr=settings.transaction_ttbr,
        outbound_hosts=tuple(settings.outbound_hosts()),
        outbound_rewrites=tuple(settings.srmp_outbound_rewrites.items()),
        stream_resend_s=settings.srmp_stream_resend_s,
        receipts_url=receipts_url(settings),
        retry_min_s=settings.srmp_retry_min_s,
        retry_max_s=max(settings.srmp_retry_max_s, settings.srmp_retry_min_s),
        outgoing_lease_s=settings.srmp_outgoing_lease_s,
        max_streams_per_sender=settings.srmp_max_streams_per_sender,
        max_streams=settings.srmp_max_streams,
        stream_idle_s=settings.srmp_stream_idle_s,
        outgoing_idle_s=settings.srmp_outgoing_idle_s,
        max_outgoing_queues_per_source=settings.srmp_max_outgoing_queues_per_source,
        max_outgoing_queues=settings.srmp_max_outgoing_queues,
    )


def receipts_url(settings: Settings) -> str:
    if settings.srmp_receipts_url:
        return settings.srmp_receipts_url
    names = [name.strip() for name in settings.local_host_names.split(",") if name.strip()]
    public = [name for name in names if name.casefold() not in _LOOPBACK_NAMES]
    host = (public or names or ["localhost"])[0]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}/{settings.srmp_virtual_directory}/private$/order_queue$"


def trigger_config(settings: Settings) -> TriggerConfig:
    return TriggerConfig(
        action_timeout_s=settings.trigger_action_timeout_s,
        action_retries=settings.trigger_action_retries,
        retry_backoff_s=settings.trigger_retry_backoff_s,
        concurrency=settings.trigger_concurrency,
        attempt_limit=settings.trigger_attempt_limit,
        peek_once=settings.trigger_peek_once,
        lease_s=settings.trigger_lease_s,
        wait_ms=int(settings.cursor_idle_timeout_s * 500),
    )


def trigger_allow_list(settings: Settings) -> AllowList:
    return AllowList(
        url_prefixes=comma_separated(settings.trigger_allowed_urls),
        commands=comma_separated(settings.trigger_allowed_commands),
        commands_enabled=settings.trigger_commands_enabled,
    )


def group_commit_config(settings: Settings) -> GroupCommitConfig:
    return GroupCommitConfig(
        settings.group_commit_max_batch,
        settings.group_commit_max_wait_ms / 1000,
        relaxed_express=settings.express_commit == "relaxed",
    )
