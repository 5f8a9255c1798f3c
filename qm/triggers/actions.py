"""Action parameters (reference §9.3), templates, the allow-list, and the runner port.

The runner itself (HTTP client, subprocesses) lives in app/; here are the rules it follows.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from qm.model import Message
from qm.triggers.conditions import body_text, invalid
from qm.triggers.model import Action, ActionKind, Rule, Trigger

Parameters = Mapping[str, str]

PARAMETER_NAMES = (
    "$MSG_ID",
    "$MSG_LABEL",
    "$MSG_BODY",
    "$MSG_BODY_AS_STRING",
    "$MSG_PRIORITY",
    "$MSG_ARRIVEDTIME",
    "$MSG_SENTTIME",
    "$MSG_CORRELATION_ID",
    "$MSG_APPSPECIFIC",
    "$MSG_QUEUE_PATHNAME",
    "$MSG_SRCMACHINEID",
    "$MSG_LOOKUP_ID",
    "$MSG_CLASS",
    "$TRIGGER_NAME",
    "$TRIGGER_ID",
    "$RULE_NAME",
)
_TOKEN = re.compile(r"\$(?:MSG|TRIGGER|RULE)_[A-Z_]+")
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


class ActionFailed(Exception):
    """The action ran and failed (non-2xx, non-zero exit, refused target): retried, logged."""


class ActionRunner(Protocol):
    async def prepare(self, action: Action) -> None:
        """Get ready to run `action` (an HTTP client made, a library imported) before the
        caller starts timing the attempt: preparation must never eat into the action's time
        limit, nor be what times out."""
        ...

    async def run(self, action: Action, parameters: Parameters) -> None:
        """Run once; raise ActionFailed on failure. The caller bounds the time."""
        ...


@dataclass(frozen=True, slots=True)
class AllowList:
    """Where actions may go: URL prefixes, and executables (absolute paths) when commands
    are enabled at all."""

    url_prefixes: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    commands_enabled: bool = False

    def check_url(self, url: str) -> None:
        """MQ_ERROR_INVALID_PARAMETER unless the final URL of a webhook (parameters substituted)
        is within the allow-list and has no `.` or `..` segment: checked right before the request."""
        if has_dot_segment(url):
            raise invalid(f"{url!r} has a '.' or '..' path segment")
        if not any(url_within(url, prefix) for prefix in self.url_prefixes):
            raise invalid(f"{url!r} is outside the allow-list (MSMQGW_TRIGGER_ALLOWED_URLS)")

    def check(self, action: Action) -> None:
        """MQ_ERROR_INVALID_PARAMETER unless the action's target is allowed."""
        if action.kind is ActionKind.WEBHOOK:
            if not any(url_within(action.url, prefix) for prefix in self.url_prefixes):
                raise invalid(
                    f"{action.url!r} is outside the allow-list (MSMQGW_TRIGGER_ALLOWED_URLS: "
                    f"{', '.join(self.url_prefixes) or 'empty'})"
                )
            return
        if not self.commands_enabled:
            raise invalid("command actions are disabled (MSMQGW_TRIGGER_COMMANDS_ENABLED=false)")
        if action.command[0] not in self.commands:
            raise invalid(
                f"{action.command[0]!r} is not an allowed command (MSMQGW_TRIGGER_ALLOWED_COMMANDS: "
                f"{', '.join(self.commands) or 'empty'})"
            )


def check_action(action: Action) -> None:
    """The action is well formed: a known method and an http(s) URL, or a command; every
    template token a known parameter."""
    if action.kind is ActionKind.WEBHOOK:
        if action.method not in METHODS:
            raise invalid(f"method {action.method!r}; use one of {', '.join(sorted(METHODS))}")
        parts = urllib.parse.urlsplit(action.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise invalid(f"{action.url!r} is not an absolute http:// or https:// URL")
        if has_dot_segment(action.url):
            raise invalid(f"{action.url!r} has a '.' or '..' path segment")
        if action.substitute_arguments:
            raise invalid("substitute_arguments is for command actions")
        texts = [action.url, action.body_template or "", *(value for _name, value in action.headers)]
    else:
        if not action.command or not action.command[0]:
            raise invalid("a command action names an executable")
        arguments = len(action.command) - 1
        for position in action.substitute_arguments:
            if not 1 <= position <= arguments:
                raise invalid(
                    f"substitute_arguments: {position} is not an argument position (1 to {arguments})"
                )
        texts = list(action.command[1:])
    for text in texts:
        for token in _TOKEN.findall(text):
            if token not in PARAMETER_NAMES:
                raise invalid(f"unknown parameter {token}; known: {', '.join(PARAMETER_NAMES)}")


_DOT_SEGMENTS = frozenset({".", ".."})


def has_dot_segment(url: str) -> bool:
    """A `.` or `..` path segment, percent-encoded or not: a server resolves it, so it could
    leave the path the allow-list checked."""
    path = urllib.parse.urlsplit(url).path
    return any(urllib.parse.unquote(segment) in _DOT_SEGMENTS for segment in path.split("/"))


def url_within(url: str, prefix: str) -> bool:
    """Same scheme, host and port, and the path under the prefix's path."""
    try:
        target, allowed = urllib.parse.urlsplit(url), urllib.parse.urlsplit(prefix)
        same_origin = (target.scheme, target.hostname, target.port) == (
            allowed.scheme,
            allowed.hostname,
            allowed.port,
        )
    except ValueError:
        return False
    return same_origin and bool(allowed.hostname) and target.path.startswith(allowed.path)


def parameters(message: Message, trigger: Trigger, rule: Rule) -> dict[str, str]:
    properties = message.properties
    correlation = properties.correlation_id
    return {
        "$MSG_ID": message.message_id,
        "$MSG_LABEL": properties.label,
        "$MSG_BODY": base64.b64encode(properties.body).decode("ascii"),
        "$MSG_BODY_AS_STRING": body_text(message) or "",
        "$MSG_PRIORITY": str(properties.priority),
        "$MSG_ARRIVEDTIME": message.arrived_time.isoformat(),
        "$MSG_SENTTIME": message.sent_time.isoformat(),
        "$MSG_CORRELATION_ID": "" if correlation is None else correlation.hex(),
        "$MSG_APPSPECIFIC": str(properties.app_specific),
        "$MSG_QUEUE_PATHNAME": trigger.queue,
        "$MSG_SRCMACHINEID": str(message.source_machine),
        "$MSG_LOOKUP_ID": str(message.lookup_id),
        "$MSG_CLASS": str(properties.message_class),
        "$TRIGGER_NAME": trigger.name,
        "$TRIGGER_ID": trigger.id,
        "$RULE_NAME": rule.name,
    }


def render(template: str, values: Parameters) -> str:
    """Replace each parameter token by its value (longest token wins: `$MSG_BODY_AS_STRING`)."""
    return _TOKEN.sub(lambda match: values.get(match.group(0), match.group(0)), template)


def render_url(template: str, values: Parameters) -> str:
    """A webhook URL: each value percent-encoded whole (`/`, `@`, `:`, `#`, `?` included), so a
    message field stays inside the component the template put it in (it cannot add a user, a
    host, a port, path segments or a fragment). The result is checked again before sending."""
    return _TOKEN.sub(
        lambda match: urllib.parse.quote(values.get(match.group(0), match.group(0)), safe=""), template
    )


def render_arguments(action: Action, values: Parameters) -> list[str]:
    """The command line: the executable, then each argument as written, or with its parameters
    replaced where the rule opted in (Action.substitute_arguments)."""
    chosen = frozenset(action.substitute_arguments)
    return [
        action.command[0],
        *(
            render(argument, values) if position in chosen else argument
            for position, argument in enumerate(action.command[1:], start=1)
        ),
    ]


def default_body(values: Parameters) -> str:
    """Without a template: every parameter as JSON, keys without the `$`."""
    return json.dumps({name.removeprefix("$").lower(): value for name, value in values.items()})
