"""Trigger actions reach only what the allow-list allows, whatever the message says (issue 18
item 7): message fields substituted into a webhook URL are percent-encoded, the final URL is
checked right before the request, `..` segments are refused, and command arguments take
message fields only where the rule opts in. The runner is exercised against real loopback
HTTP servers and a real executable; no store is involved."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.trigger_actions import HttpAndCommandRunner
from qm.errors import MqError
from qm.triggers.actions import ActionFailed, AllowList, check_action
from qm.triggers.model import Action, ActionKind
from tests.webhook_server import WebhookServer

pytestmark = pytest.mark.anyio
TOUCH = "/usr/bin/touch"


@pytest.fixture
async def allowed() -> AsyncIterator[WebhookServer]:
    async with WebhookServer() as server:
        yield server


@pytest.fixture
async def internal() -> AsyncIterator[WebhookServer]:
    """A service on the same machine that the allow-list does not name."""
    async with WebhookServer() as server:
        yield server


def runner_for(server: WebhookServer, commands: tuple[str, ...] = ()) -> HttpAndCommandRunner:
    return HttpAndCommandRunner(
        AllowList(url_prefixes=(f"{server.url}/hooks/",), commands=commands, commands_enabled=bool(commands))
    )


async def fire(runner: HttpAndCommandRunner, action: Action, label: str) -> None:
    check_action(action)
    try:
        await runner.run(action, {"$MSG_LABEL": label})
    finally:
        await runner.close()


async def test_a_label_cannot_move_the_webhook_to_another_host_or_port(
    allowed: WebhookServer, internal: WebhookServer
) -> None:
    template = f"http://$MSG_LABEL@127.0.0.1:{allowed.port}/hooks/in"
    label = f"x@127.0.0.1:{internal.port}/stolen#"
    await fire(runner_for(allowed), Action(ActionKind.WEBHOOK, url=template), label)
    assert internal.hits == []
    assert [hit.path for hit in allowed.hits] == ["/hooks/in"]


async def test_a_label_cannot_climb_out_of_the_allowed_path(allowed: WebhookServer) -> None:
    action = Action(ActionKind.WEBHOOK, url=f"{allowed.url}/hooks/$MSG_LABEL")
    await fire(runner_for(allowed), action, "../../admin/purge")
    [hit] = allowed.hits
    assert hit.path == "/hooks/..%2F..%2Fadmin%2Fpurge"


async def test_a_label_that_is_a_dot_segment_is_refused_before_sending(allowed: WebhookServer) -> None:
    action = Action(ActionKind.WEBHOOK, url=f"{allowed.url}/hooks/$MSG_LABEL/x")
    with pytest.raises(ActionFailed):
        await fire(runner_for(allowed), action, "..")
    assert allowed.hits == []


@pytest.mark.parametrize("path", ["/hooks/../admin", "/hooks/./x", "/hooks/%2e%2E/admin"])
def test_a_url_template_with_a_dot_segment_is_refused(path: str) -> None:
    with pytest.raises(MqError):
        check_action(Action(ActionKind.WEBHOOK, url=f"http://127.0.0.1:9000{path}"))


async def test_command_arguments_take_no_message_field_unless_the_rule_says_so(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    action = Action(ActionKind.COMMAND, command=(TOUCH, f"{tmp_path}/$MSG_LABEL"))
    async with WebhookServer() as server:
        await fire(runner_for(server, (TOUCH,)), action, "../victim")
    assert not victim.exists()
    assert (tmp_path / "$MSG_LABEL").exists()  # the argument as written


async def test_a_command_argument_opted_in_takes_the_message_field(tmp_path: Path) -> None:
    action = Action(ActionKind.COMMAND, command=(TOUCH, f"{tmp_path}/$MSG_LABEL"), substitute_arguments=(1,))
    async with WebhookServer() as server:
        await fire(runner_for(server, (TOUCH,)), action, "made")
    assert (tmp_path / "made").exists()


@pytest.mark.parametrize("positions", [(0,), (2,), (-1,)])
def test_only_existing_arguments_can_be_opted_in(positions: tuple[int, ...]) -> None:
    with pytest.raises(MqError):
        action = Action(ActionKind.COMMAND, command=(TOUCH, "$MSG_LABEL"), substitute_arguments=positions)
        check_action(action)
