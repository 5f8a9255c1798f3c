"""The trigger action runner: HTTP calls with httpx, commands without a shell."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from app.configs import trigger_allow_list, trigger_config
from app.housekeeping import supervise
from app.settings import Settings
from qm.errors import MqError
from qm.manager import QueueManager
from qm.store import Store
from qm.triggers.actions import (
    ActionFailed,
    AllowList,
    Parameters,
    default_body,
    render,
    render_arguments,
    render_url,
)
from qm.triggers.admin import TriggerAdmin
from qm.triggers.model import Action, ActionKind
from qm.triggers.service import TriggerService

if TYPE_CHECKING:
    import httpx

STDERR_TAIL = 300


class HttpAndCommandRunner:
    """Checks the allow-list again at run time (settings may have changed since the rule
    was stored); never follows redirects (a redirect could leave the allow-list)."""

    def __init__(self, allow_list: AllowList, ca_file: str = "") -> None:
        self._allow_list = allow_list
        self._ca_file = ca_file
        self._client: httpx.AsyncClient | None = None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def prepare(self, action: Action) -> None:
        """The HTTP client is made before the first webhook's timed attempt (importing httpx
        at start-up would slow every start-up; inside the attempt it could take the whole
        action timeout on a loaded machine, and the webhook would never be called)."""
        if action.kind is ActionKind.WEBHOOK:
            self._http()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            from app.outbound.client import outbound_verification

            verify = outbound_verification(self._ca_file)
            self._client = httpx.AsyncClient(follow_redirects=False, timeout=None, verify=verify)
        return self._client

    async def run(self, action: Action, parameters: Parameters) -> None:
        try:
            self._allow_list.check(action)
        except MqError as refused:
            raise ActionFailed(refused.detail) from None
        if action.kind is ActionKind.WEBHOOK:
            await self._call(action, parameters)
        else:
            await _execute(action, parameters)

    async def _call(self, action: Action, parameters: Parameters) -> None:
        body = (
            default_body(parameters)
            if action.body_template is None
            else render(action.body_template, parameters)
        )
        headers = {name: render(value, parameters) for name, value in action.headers}
        if action.body_template is None:
            headers.setdefault("Content-Type", "application/json")
        import httpx

        try:
            # What is checked is what is sent: the URL as httpx normalises it, after substitution.
            target = httpx.URL(render_url(action.url, parameters))
            self._allow_list.check_url(str(target))
        except (httpx.InvalidURL, MqError) as refused:
            raise ActionFailed(getattr(refused, "detail", str(refused))) from None
        try:
            response = await self._http().request(
                action.method, target, headers=headers, content=body.encode()
            )
        except httpx.HTTPError as error:
            raise ActionFailed(f"{type(error).__name__}: {error}") from None
        if not 200 <= response.status_code < 300:
            raise ActionFailed(f"HTTP {response.status_code} from {action.url}")


async def _execute(action: Action, parameters: Parameters) -> None:
    arguments = render_arguments(action, parameters)
    try:
        process = await asyncio.create_subprocess_exec(
            *arguments,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:
        raise ActionFailed(f"cannot run {arguments[0]}: {error}") from None
    try:
        _out, errors = await process.communicate()
    except asyncio.CancelledError:  # the attempt timed out: do not leave the process behind
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        tail = errors.decode(errors="replace")[-STDERR_TAIL:].strip()
        raise ActionFailed(f"{arguments[0]} exited with {process.returncode}: {tail}")


class TriggerRuntime:
    """The trigger service of one application: its admin, its supervised task, its runner."""

    def __init__(self, manager: QueueManager, store: Store, settings: Settings) -> None:
        allow_list = trigger_allow_list(settings)
        self.admin = TriggerAdmin(manager, store.triggers, allow_list)
        self._runner = HttpAndCommandRunner(allow_list, settings.outbound_ca_file)
        self.service = TriggerService(manager, store.triggers, self._runner, trigger_config(settings))
        self._task: asyncio.Task[None] | None = None
        if settings.triggers_enabled:
            refresh = settings.trigger_refresh_interval_s
            self._task = asyncio.create_task(
                supervise("triggers", self.service.refresh, refresh), name="triggers"
            )

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The supervised trigger service, None when it is turned off (readiness looks at it)."""
        return self._task

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.service.close()
        await self._runner.close()
