"""No side channel around encryption at rest: what a model or an operator writes in free text is
sealed wherever it is stored (a failure cluster's notes, a legal hold's reason), and personal data
never enters an agent's memory (refused by the memory gateway, the one that refuses rule content,
on every path: the `remember` tool, `Service`, any agent)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from sursis.domain.access import Role
from sursis.domain.clock import utcnow
from sursis.domain.records import Principal
from sursis.domain.retention.retention import RetentionService
from sursis.domain.worlds.memory import MemoryKind, MemoryRefused, MemoryTier
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from sursis.infra.encryption import AesGcmCipher, LocalKeyring
from sursis.infra.worlds.memory import MemoryGateway, MemoryScope
from tests.api.test_encryption_at_rest import new_key

SECRET = "umber-ibis-4410"
ADMIN = Principal(id="test-admin", role=Role.ADMIN, workspace=None, name="test")


@pytest.fixture
async def uow(database_url: str) -> AsyncIterator[SqlUnitOfWorkFactory]:
    engine = create_engine(database_url)
    yield SqlUnitOfWorkFactory(engine, cipher=AesGcmCipher(LocalKeyring.parse(new_key("k1"))))
    await engine.dispose()


async def raw(uow: SqlUnitOfWorkFactory, query: str) -> list[str]:
    async with uow.engine.connect() as conn:
        return [str(v) for v in await conn.scalars(sa.text(query))]


async def test_a_legal_hold_s_reason_is_sealed_and_reads_back(uow: SqlUnitOfWorkFactory) -> None:
    retention = RetentionService(uow, utcnow)
    hold = await retention.add_hold(ADMIN, "default", None, f"subpoena {SECRET}")
    [stored] = await raw(uow, "SELECT reason FROM legal_holds")
    assert stored.startswith("sursis:enc:1:k1:") and SECRET not in stored
    [listed] = await retention.list_holds(ADMIN, "default")
    assert listed.reason == f"subpoena {SECRET}"
    released = await retention.release_hold(ADMIN, hold.id)
    assert released.reason == f"subpoena {SECRET}"


async def test_a_failure_cluster_s_notes_are_sealed_and_read_back(uow: SqlUnitOfWorkFactory) -> None:
    await seed_demo(uow, "default", utcnow())
    async with uow() as work:
        [cluster, *_] = await work.ops.list_clusters("default", None)
        triaged = await work.ops.triage_cluster(
            "default", cluster["cluster_id"], "escalate", f"model says {SECRET}", utcnow()
        )
        await work.commit()
    assert triaged["notes"] == f"model says {SECRET}"
    stored = await raw(uow, "SELECT notes FROM failure_clusters WHERE notes IS NOT NULL")
    assert len(stored) == 1 and stored[0].startswith("sursis:enc:1:k1:") and SECRET not in stored[0]
    async with uow.reader() as work:
        detail = await work.ops.get_cluster("default", cluster["cluster_id"])
    assert detail is not None and detail["notes"] == f"model says {SECRET}"


@pytest.mark.parametrize(
    "text",
    [
        "Customer Jane Doe prefers refunds to vouchers",
        "the caller named Ana Lima asked twice",
        "Mrs. Okafor escalates when a refund is late",
        "her card ending in 4242 was declined twice",
        "card digits 4111 1111 1111 1112 came back from the scan",
        "the visa 0005 keeps failing the 3-D Secure step",
        "refunds go to jane.doe@example.com",
    ],
)
async def test_personal_data_is_refused_by_the_memory_gateway_and_nothing_is_stored(
    uow: SqlUnitOfWorkFactory, text: str
) -> None:
    gateway = MemoryGateway(uow, utcnow)
    where = MemoryScope("default", "world", None, uuid.uuid4(), uuid.uuid4())
    with pytest.raises(MemoryRefused) as refused:
        await gateway.remember(where, text, MemoryTier.PERSISTENT, MemoryKind.OBSERVATION, [])
    assert refused.value.code == "MEMORY_PERSONAL_DATA"
    assert await raw(uow, "SELECT text FROM memories") == []


async def test_meta_knowledge_is_still_remembered(uow: SqlUnitOfWorkFactory) -> None:
    gateway = MemoryGateway(uow, utcnow)
    where = MemoryScope("default", "world", None, uuid.uuid4(), uuid.uuid4())
    for text in (
        "The Slack channel answers faster than e-mail for approvals",
        "Customers in this workspace prefer refunds over vouchers",
        "Predicates over 200 lines fail review; split them",
    ):
        await gateway.remember(where, text, MemoryTier.PERSISTENT, MemoryKind.PATTERN, [])
    assert len(await raw(uow, "SELECT text FROM memories")) == 3
