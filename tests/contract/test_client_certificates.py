"""storage.access's client certificate mappings on both stores, and app.client_certs'
CertificateMapper: remembered for the TTL (no read per request), forgotten at once here."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.client_certs import CertificateMapper, ClientCertificate, map_certificate
from qm.clock import SettableClock
from qm.errors import MqErrorCode
from storage.access import SqlAccess
from storage.engine import make_engine
from storage.store import SqlStore
from tests.contract.support import mq_error

pytestmark = pytest.mark.anyio
SUBJECT = "CN=winbox.example.net,O=Example"
ISSUER = "CN=Example CA"


@pytest.fixture
async def access(database_url: str) -> AsyncIterator[SqlAccess]:
    store = SqlStore(make_engine(database_url))
    yield store.access
    await store.close()


class CountingAccess:
    """The real store, counting the look-ups of mappings (the cache's reads)."""

    def __init__(self, access: SqlAccess) -> None:
        self.access = access
        self.finds = 0

    async def find_certificate(self, subject: str, issuer: str) -> object:
        self.finds += 1
        return await self.access.find_certificate(subject, issuer)


async def test_a_mapping_is_found_by_exact_subject_and_issuer(
    access: SqlAccess, clock: SettableClock
) -> None:
    mapping = await map_certificate(access, SUBJECT, ISSUER, "winbox", "plant 4", clock.now())
    assert mapping.id > 0
    found = await access.find_certificate(SUBJECT, ISSUER)
    assert found == mapping
    assert (found.principal, found.description, found.created_at) == ("winbox", "plant 4", clock.now())
    assert [p.name for p in await access.list_principals()] == ["winbox"]  # created with it
    for subject, issuer in (
        (SUBJECT, "CN=Another CA"),  # the same name from another CA proves nothing
        (SUBJECT.lower(), ISSUER),
        ("CN=winbox.example.net", ISSUER),
        (SUBJECT + " ", ISSUER),
    ):
        assert await access.find_certificate(subject, issuer) is None


async def test_one_mapping_per_subject_and_issuer(access: SqlAccess, clock: SettableClock) -> None:
    await map_certificate(access, SUBJECT, ISSUER, "winbox", "", clock.now())
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_PARAMETER):
        await map_certificate(access, SUBJECT, ISSUER, "someone-else", "", clock.now())
    other_ca = await map_certificate(access, SUBJECT, "CN=Another CA", "someone-else", "", clock.now())
    listed = await access.list_certificates(None)
    assert [(m.principal, m.issuer) for m in listed] == [
        ("winbox", ISSUER),
        ("someone-else", "CN=Another CA"),
    ]
    assert await access.list_certificates("someone-else") == [other_ca]


@pytest.mark.parametrize(
    ("subject", "issuer", "principal"),
    [
        ("", ISSUER, "p"),
        (SUBJECT, "", "p"),
        ("CN=a\nb", ISSUER, "p"),
        ("x" * 1001, ISSUER, "p"),
        (SUBJECT, ISSUER, "a:b"),
        (SUBJECT, ISSUER, "anonymous"),  # would own for every caller without credentials
        (SUBJECT, ISSUER, "anonymous-srmp"),
    ],
)
async def test_malformed_mappings_are_refused_and_change_nothing(
    access: SqlAccess, clock: SettableClock, subject: str, issuer: str, principal: str
) -> None:
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_PARAMETER):
        await map_certificate(access, subject, issuer, principal, "", clock.now())
    assert await access.list_certificates(None) == []
    assert await access.list_principals() == []


async def test_deleting_a_mapping_or_its_principal_removes_it(
    access: SqlAccess, clock: SettableClock
) -> None:
    first = await map_certificate(access, SUBJECT, ISSUER, "winbox", "", clock.now())
    second = await map_certificate(access, "CN=other", ISSUER, "winbox", "", clock.now())
    assert await access.delete_certificate(first.id)
    assert not await access.delete_certificate(first.id)
    assert await access.find_certificate(SUBJECT, ISSUER) is None
    assert await access.delete_principal("winbox")
    assert await access.find_certificate(second.subject, second.issuer) is None
    assert await access.list_certificates(None) == []


async def test_the_mapper_reads_once_per_ttl_and_sees_a_deletion_after_it(
    access: SqlAccess, clock: SettableClock
) -> None:
    now = [0.0]
    counting = CountingAccess(access)
    mapper = CertificateMapper(counting, 5.0, lambda: now[0])  # type: ignore[arg-type]
    mapping = await map_certificate(access, SUBJECT, ISSUER, "winbox", "", clock.now())
    mapped, unmapped = ClientCertificate(SUBJECT, ISSUER), ClientCertificate("CN=stranger", ISSUER)
    for _ in range(3):
        assert await mapper.principal_for(mapped) == "winbox"
        assert await mapper.principal_for(unmapped) is None
    assert counting.finds == 2  # one read each, the unmapped one remembered too
    assert await access.delete_certificate(mapping.id)  # as another process would
    now[0] = 4.9
    assert await mapper.principal_for(mapped) == "winbox"  # still remembered
    now[0] = 5.1
    assert await mapper.principal_for(mapped) is None
    await map_certificate(access, "CN=stranger", ISSUER, "stranger", "", clock.now())
    mapper.forget()  # what this process does after its own change
    assert await mapper.principal_for(unmapped) == "stranger"
