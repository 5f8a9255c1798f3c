"""The app's routes: one flat list in the order app/main.py gives (see `add_routes`)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import Match

from app.main import add_routes, create_app
from app.routes import lookup, messages, queues
from app.settings import Settings


def app_without_database() -> FastAPI:
    # Building the app makes no connection; only its lifespan would.
    return create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))


def endpoint_for(app: FastAPI, method: str, path: str) -> str:
    """The endpoint the router picks: the first route that fully matches, as the router walks."""
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "path_params": {}}
    for route in app.routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return str(getattr(route, "name", ""))
    return "no route"


def test_every_route_of_the_app_is_on_its_own_list() -> None:
    """No included-router nodes that each request would walk: FastAPI sees the same flat list."""
    routes = app_without_database().routes
    assert [context.original_route for context in iter_route_contexts(routes)] == routes
    assert all(hasattr(route, "path") for route in routes)


@pytest.mark.parametrize(
    ("method", "path", "endpoint"),
    [
        ("POST", "/api/queues/private$/orders/messages", messages.send.__name__),
        ("GET", "/api/queues/private$/orders/messages", messages.browse.__name__),
        ("POST", "/api/queues/private$/orders/receive", messages.receive.__name__),
        ("POST", "/api/queues/private$/orders/messages/first/receive", lookup.receive_first.__name__),
        ("GET", "/api/queues/private$/orders/peek", messages.peek.__name__),
        ("POST", "/api/queues/private$/orders/purge", queues.purge_queue.__name__),
        ("GET", "/api/queues/private$/orders", "get_queue"),
    ],
)
def test_requests_reach_the_endpoint_the_route_order_gives(method: str, path: str, endpoint: str) -> None:
    assert endpoint_for(app_without_database(), method, path) == endpoint


def test_the_busiest_routes_are_matched_first() -> None:
    """After FastAPI's own few (the OpenAPI document and its viewers)."""
    names = [route.name for route in app_without_database().routes if isinstance(route, APIRoute)]
    assert names[:2] == [messages.send.__name__, messages.browse.__name__]


@pytest.mark.anyio
async def test_added_routes_are_served_with_their_router_prefix_and_tags() -> None:
    """Fails if FastAPI stops serving path operations put on `app.router.routes`."""
    router = APIRouter(prefix="/things", tags=["things"])

    @router.get("/{name}")
    async def show(name: str) -> dict[str, str]:
        return {"name": name}

    app = FastAPI()
    add_routes(app, router)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        response = await client.get("/things/one")
    assert (response.status_code, response.json()) == (200, {"name": "one"})
    assert app.openapi()["paths"]["/things/{name}"]["get"]["tags"] == ["things"]


def test_a_router_that_includes_another_is_refused() -> None:
    inner, outer = APIRouter(), APIRouter()
    inner.add_api_route("/inner", lambda: None)
    outer.include_router(inner)
    with pytest.raises(TypeError):
        add_routes(FastAPI(), outer)
    assert isinstance(inner.routes[0], APIRoute)
