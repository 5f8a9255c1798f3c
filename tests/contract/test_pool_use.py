"""storage.engine.watch_pool: what the gateway's gauge of database pool use is told."""

from __future__ import annotations

import pytest

from storage.engine import make_engine, pool_size, watch_pool

pytestmark = pytest.mark.anyio


async def test_each_connection_taken_is_counted_until_it_is_given_back(database_url: str) -> None:
    engine = make_engine(database_url)
    in_use = 0

    def changed(by: int) -> None:
        nonlocal in_use
        in_use += by

    watch_pool(engine, changed)
    try:
        async with engine.connect() as first:
            assert in_use == 1
            async with engine.connect() as second:
                assert in_use == 2
                assert first is not second
            assert in_use == 1
        assert in_use == 0
        assert pool_size(engine) == 20
    finally:
        await engine.dispose()
