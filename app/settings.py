"""Service settings: one class, environment prefix MSMQGW_, validated at start-up (what each part
of the gateway makes of them: app.configs)."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url

from qm.config import DEFAULT_MAX_BODY_BYTES, TransactionTtbr
from qm.model import INFINITE
from qm.outbound import parse_allow_list
from soap.times import LayoutMismatch, TimerMapping

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./var/msmq-gateway.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MSMQGW_", extra="forbid")

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL: sqlite+aiosqlite:///path or postgresql+asyncpg://user@host/db",
    )
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1, description="Largest message body accepted")
    max_admin_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest request body of the administrative JSON endpoints (queues, cursors, rules, "
        "triggers, settings); sends, SOAP and SRMP have the message caps",
    )
    http_max_header_bytes: int = Field(
        64 * 1024, ge=1024, description="Largest request head (request line and headers) in bytes: 431 above"
    )
    http_max_headers: int = Field(
        100, ge=10, description="Most header fields one request may carry: 431 above"
    )
    http_header_timeout_s: float = Field(
        10.0, gt=0, description="A connection must send a whole request head within this: 408 and closed"
    )
    http_body_timeout_s: float = Field(
        60.0, gt=0, description="A request body must arrive within this of its head (while read): closed"
    )
    http_keep_alive_s: int = Field(5, ge=1, description="An idle keep-alive connection is closed after this")
    max_connections: int = Field(
        1000, ge=1, description="Connections served at once; more are answered 503 and closed"
    )
    tls_cert_file: str = Field(
        "", description="PEM certificate (chain) `serve` presents: HTTPS instead of HTTP (with tls_key_file)"
    )
    tls_key_file: str = Field("", description="PEM private key of tls_cert_file")
    tls_client_ca_file: str = Field(
        "", description="PEM CAs whose client certificates are asked for and checked (HTTPS only)"
    )
    tls_client_cert: Literal["optional", "required"] = Field(
        "optional", description="With tls_client_ca_file: optional (checked when sent) or required"
    )
    outbound_ca_file: str = Field(
        "",
        description="PEM CAs trusted for outbound HTTPS (SRMP sends, receipts, webhooks) instead of the "
        "default bundle; certificates are always verified",
    )
    max_answer_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1,
        description="Most bytes of one answer listing messages, as sent: browse pages, receive batches "
        "and export reads stop there (always at least one message)",
    )
    max_wait_ms: int = Field(60_000, ge=0, description="Longest single receive/peek wait over HTTP")
    transaction_timeout_s: float = Field(60.0, gt=0, description="Idle transactions abort after this")
    cursor_idle_timeout_s: float = Field(300.0, gt=0, description="Idle cursors close after this")
    default_lock_timeout_s: float = Field(30.0, gt=0, description="Two-phase read lock when none is given")
    max_lock_timeout_s: float = Field(3600.0, gt=0)
    initial_quota_kb: int = Field(
        INFINITE, ge=0, le=INFINITE, description="Machine quota set when the store is first created"
    )
    housekeeping_interval_s: float = Field(
        1.0, gt=0, description="How often expired locks, transactions and cursors are released"
    )
    sweep_interval_s: float = Field(
        0.5, gt=0, description="How often messages past their time-to-be-received are expired"
    )
    local_host_names: str = Field(
        default_factory=lambda: f"localhost,127.0.0.1,::1,{socket.gethostname()}",
        description="Comma-separated names and addresses that designate this gateway in format names",
    )
    allowed_hosts: str = Field(
        default_factory=lambda: f"localhost,127.0.0.1,[::1],{socket.gethostname()}",
        description="Comma-separated names a request's Host header may carry (DNS rebinding guard), "
        "besides the bind address and MSMQGW_LOCAL_HOST_NAMES; list every name SRMP senders and clients "
        "use (http://<name>/msmq/...); `*` turns the check off (a proxy in front checks it)",
    )
    transaction_ttbr: TransactionTtbr = Field(
        TransactionTtbr.FIRST_MESSAGE,
        description="first-message: MSMQ's rule (a transaction's messages get its first message's TTBR); "
        "per-message: each keeps its own",
    )
    srmp_timer_mapping: TimerMapping = Field(
        TimerMapping.SDK,
        description="sdk: <Msmq><TTrq> holds the TTBR deadline, <expiresAt> the TTRQ; wire-example: reverse",
    )
    srmp_timer_layout_mismatch: LayoutMismatch = Field(
        LayoutMismatch.SWAP,
        description="When the TTRQ deadline read is later than the TTBR's: swap them, or clamp the TTRQ",
    )
    srmp_virtual_directory: str = Field("msmq", description="First path segment of SRMP URLs")
    srmp_outbound_hosts: str = Field(
        "",
        description="Comma-separated destinations the gateway may POST to as an SRMP sender "
        "(sender-supplied URLs: an allow-list against SSRF): `host` (its scheme's default port), "
        "`host:port`, `host:*`, optionally `http://` or `https://` first; `*` allows anything",
    )
    srmp_outbound_rewrites: dict[str, str] = Field(
        default_factory=dict,
        description="JSON object of URL prefix -> replacement applied to receipt URLs first, e.g. "
        '{"http://winbox/": "http://10.0.0.7/"}',
    )
    srmp_retry_min_s: float = Field(1.0, gt=0, description="First wait before resending to a failing host")
    srmp_retry_max_s: float = Field(60.0, gt=0, description="Longest wait between resends to a failing host")
    srmp_stream_resend_s: float = Field(
        30.0, gt=0, description="Resend a transactional message no stream receipt covered after this"
    )
    srmp_receipts_url: str = Field(
        "",
        description="Where receivers send stream receipts for the transactional messages this gateway "
        "sends; default http://<first non-loopback local host name>:<port>/msmq/private$/order_queue$",
    )
    srmp_send_timeout_s: float = Field(
        30.0, gt=0, description="Longest one outbound SRMP POST may take (at most half the outgoing lease)"
    )
    srmp_outgoing_lease_s: float = Field(
        90.0,
        gt=0,
        description="One process sends each outgoing queue at a time; a queue whose process stopped "
        "(crashed) is taken over by another after this",
    )
    srmp_send_interval_s: float = Field(
        1.0, gt=0, description="How often due stream receipts and outgoing queues are looked at"
    )
    srmp_max_streams_per_sender: int = Field(
        1000, ge=1, description="Incoming SRMP streams one sender (stream ID GUID) may have at once"
    )
    srmp_max_streams: int = Field(
        100_000, ge=1, description="Incoming SRMP streams all senders together may have at once"
    )
    srmp_stream_idle_s: float = Field(
        14 * 86400.0,
        gt=0,
        description="Incoming stream state untouched this long, owing nothing, is forgotten",
    )
    srmp_outgoing_idle_s: float = Field(
        86400.0, gt=0, description="An empty outgoing queue not attempted for this long is removed"
    )
    srmp_max_outgoing_queues_per_source: int = Field(
        20, ge=1, description="Outgoing queues that acknowledgments of one anonymous SRMP source may make"
    )
    srmp_max_outgoing_queues: int = Field(
        1000, ge=1, description="Outgoing queues that acknowledgments of all anonymous SRMP senders may make"
    )
    wake_poll_interval_s: float = Field(
        1.0, gt=0, description="How soon a waiting receive notices a message sent by another process"
    )

    group_commit_max_batch: int = Field(
        256, ge=1, le=10_000, description="Most concurrent sends written by one transaction (group commit)"
    )
    group_commit_max_wait_ms: float = Field(
        0.0,
        ge=0,
        le=1000,
        description="How long a commit may wait for more concurrent sends before it starts; 0: none "
        "(a batch is what arrived while the previous commit was under way)",
    )

    express_commit: Literal["relaxed", "durable"] = Field(
        "relaxed",
        description="relaxed: express messages commit without waiting for the disk (lost if the machine "
        "or database server crashes, as in MSMQ); durable: like recoverable ones",
    )

    driver_sql: bool = Field(
        True,
        description="Run the hot statements straight on the database driver inside SQLAlchemy's "
        "transaction (storage/driver_sql.py); false: everything through SQLAlchemy (slower; for an "
        "SQLAlchemy release the gateway has not been checked against)",
    )

    request_log: Literal["off", "json"] = Field(
        "off",
        description="json: one JSON line per HTTP request on stderr (method, route, status, duration, "
        "request ID)",
    )
    metrics_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Serve GET /metrics on this port (same host) instead of the API's port",
    )

    triggers_enabled: bool = Field(True, description="Run the Message Queuing Triggers service")
    trigger_allowed_urls: str = Field(
        "", description="Comma-separated URL prefixes webhook actions may call (empty: none)"
    )
    trigger_commands_enabled: bool = Field(False, description="Allow command actions (run without a shell)")
    trigger_allowed_commands: str = Field(
        "", description="Comma-separated absolute paths of executables command actions may run"
    )
    trigger_action_timeout_s: float = Field(10.0, gt=0, description="One attempt of one trigger action")
    trigger_action_retries: int = Field(2, ge=0, le=10, description="Retries of a failed action")
    trigger_retry_backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles each time")
    trigger_concurrency: int = Field(4, ge=1, description="Actions a non-serialized trigger runs at once")
    trigger_attempt_limit: int = Field(
        5, ge=0, description="Transactional retrieval: failed attempts before dead-lettering (0: never)"
    )
    trigger_peek_once: bool = Field(
        False, description="Process each message once per walk (no double activation after a priority jump)"
    )
    trigger_refresh_interval_s: float = Field(
        1.0, gt=0, description="How soon trigger changes are applied and leases renewed"
    )
    trigger_lease_s: float = Field(
        15.0, gt=0, description="A trigger held by a process that stopped renewing moves after this"
    )
    max_import_bytes: int = Field(
        64 * 1024 * 1024, ge=1, description="Largest message import file (JSON lines) accepted"
    )
    redrive_interval_s: float = Field(
        5.0, gt=0, description="How often redrive batches staged by the pipeline are looked for and applied"
    )

    @model_validator(mode="after")
    def _tls_files_together(self) -> Settings:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("tls_cert_file and tls_key_file go together: give both or neither")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise ValueError("tls_client_ca_file needs tls_cert_file and tls_key_file (HTTPS)")
        if self.srmp_client_cert != "optional" and not self.tls_client_ca_file:
            raise ValueError(
                "srmp_client_cert needs tls_client_ca_file: no certificate is verified without it"
            )
        return self

    anonymous_admin: bool = Field(
        True,
        description="Callers without credentials from a loopback address have every right (the README's "
        "walk-through needs no set-up); false: they have only what is granted to `anonymous`. On a "
        "non-loopback MSMQGW_HOST the gateway refuses to start while this is true, unless "
        "MSMQGW_ALLOW_UNAUTHENTICATED_NETWORK is set (docs/security.md)",
    )
    allow_unauthenticated_network: bool = Field(
        False,
        description="Let callers without credentials administer from any address, and start so on a "
        "network address (a warning is logged): for a closed lab network only",
    )
    auth_cache_ttl_s: float = Field(
        5.0,
        gt=0,
        le=300,
        description="How long a verified API key, a client certificate's mapping and a principal's grants "
        "are remembered: a change through another gateway process takes effect within this time",
    )
    srmp_anonymous_write: Literal["all", "granted"] = Field(
        "all",
        description="all: SRMP senders (principal anonymous-srmp) may write every local queue, as MSMQ's "
        "default queue ACL lets ANONYMOUS LOGON send; granted: only queues where anonymous-srmp holds "
        "WRITE_MESSAGE",
    )
    srmp_client_cert: Literal["optional", "required", "mapped"] = Field(
        "optional",
        description="SRMP over HTTPS: optional (a mapped client certificate writes as its principal, "
        "others as anonymous-srmp); required (no certificate: refused); mapped (only certificates "
        "mapped to a principal write)",
    )
    srmp_source_networks: str = Field(
        "",
        description="Comma-separated networks (CIDR) SRMP senders may write from; empty: any. A message "
        "from elsewhere is refused as MQMSG_CLASS_NACK_ACCESS_DENIED",
    )
    audit_retention_days: float = Field(
        90.0, gt=0, description="Audit log entries older than this are pruned by housekeeping"
    )

    @model_validator(mode="after")
    def _send_fits_in_lease(self) -> Settings:
        if self.srmp_send_timeout_s > self.srmp_outgoing_lease_s / 2:
            raise ValueError(
                f"srmp_send_timeout_s ({self.srmp_send_timeout_s:g}) must be at most half of "
                f"srmp_outgoing_lease_s ({self.srmp_outgoing_lease_s:g}): a POST must end before the "
                "lease covering it can run out"
            )
        return self

    @field_validator("srmp_outbound_hosts")
    @classmethod
    def _outbound_hosts_parse(cls, value: str) -> str:
        parse_allow_list(value.split(","))  # a malformed entry stops the start (ValueError)
        return value

    def display_database_url(self) -> str:
        """The database URL with any password masked, for logs and messages."""
        return make_url(self.database_url).render_as_string(hide_password=True)

    @field_validator("srmp_source_networks")
    @classmethod
    def _networks_parse(cls, value: str) -> str:
        for item in comma_separated(value):
            ipaddress.ip_network(item, strict=False)  # ValueError names the bad one
        return value

    def source_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(
            ipaddress.ip_network(item, strict=False) for item in comma_separated(self.srmp_source_networks)
        )

    def outbound_hosts(self) -> list[str]:
        return [name.strip() for name in self.srmp_outbound_hosts.split(",") if name.strip()]


def comma_separated(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


ENVIRONMENT_PREFIX = "MSMQGW_"


def load_settings(environment: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment; an unknown MSMQGW_* variable is an error, not ignored."""
    environment = os.environ if environment is None else environment
    known = {ENVIRONMENT_PREFIX + name.upper() for name in Settings.model_fields}
    unknown = sorted(
        key for key in environment if key.upper().startswith(ENVIRONMENT_PREFIX) and key.upper() not in known
    )
    if unknown:
        raise ValueError(f"unknown setting {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return Settings()
