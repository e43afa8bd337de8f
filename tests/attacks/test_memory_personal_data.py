"""Personal data slipped into an agent's memory in the forms the pattern filter used to pass: a
name under a label, an IBAN, a street address, a phone number, a card number.

The memory gateway now asks maintained validators (`phonenumbers`, `schwifty`, `python-stdnum`'s
Luhn, `email-validator`) and the labelled-name and address forms; each write is refused and
nothing is stored, while ordinary meta-knowledge is still remembered.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from sursis.domain.clock import utcnow
from sursis.domain.worlds.memory import MemoryKind, MemoryRefused, MemoryTier, check_memory
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.worlds.memory import MemoryGateway, MemoryScope
from sursis.infra.worlds.personal_data import ValidatedPersonalData

PERSONAL = {
    "name: Jane Doe asked for the refund twice": "a name",
    "Full name = Jane Doe; prefers e-mail": "a name",
    "the account holder, Jane Doe, disputes every fee": "a name",
    "refund went to DE89 3704 0044 0532 0130 00 last time": "an IBAN",
    "their iban gb82west12345698765432 is on file": "an IBAN",
    "call them back on +44 20 7946 0958 after five": "a phone number",
    "the office line is (415) 555-2671": "a phone number",
    "parcels go to 221B Baker Street, London": "an address",
    "ship to 42 Wallaby Way, Sydney": "an address",
    "she moved to Hauptstraße 12 in Berlin": "an address",
    "the depot is at 8 rue de Rivoli": "an address",
    "the postcode is SW1A 1AA": "an address",
    "card 4242 4242 4242 4242 was charged twice": "a card number",
    "receipts go to jane.doe@example.com": "an e-mail address",
}

META = [
    "Refunds above 500 need finance approval; ask before calling deploy",
    "The Slack channel #ops answers faster in the morning than e-mail",
    "cluster c-7 keeps timing out on the partner hook after 30 s, retried 12 times",
    "use the search tool before the lookup tool; version 2.3.4 of the API renamed a field",
    "the tool name: refund takes its amount in cents, never in euros",
    "Order ids look like ORD-2024-000123 and are unique per workspace",
    "Customers in this workspace prefer refunds over vouchers",
    "Predicates over 200 lines fail review; split them into 3 or 4 rules",
    "the account holder field is empty for business customers",
    "the street address field is optional in the checkout form",
    "deploys on Friday after 16:00 are asked, never run unasked",
]


@pytest.mark.parametrize("text", list(PERSONAL))
def test_each_form_is_refused_by_the_filter(text: str) -> None:
    with pytest.raises(MemoryRefused) as refused:
        check_memory(text, enshrined_texts=[], tool_outputs=[], detector=ValidatedPersonalData())
    assert refused.value.code == "MEMORY_PERSONAL_DATA", text


@pytest.mark.parametrize("text", META)
def test_meta_knowledge_passes_the_filter(text: str) -> None:
    check_memory(text, enshrined_texts=[], tool_outputs=[], detector=ValidatedPersonalData())


def test_the_validators_name_what_they_found() -> None:
    found = ValidatedPersonalData()
    assert found.find("DE89 3704 0044 0532 0130 00") == "an IBAN"
    assert found.find("DE89 3704 0044 0532 0130 01") is None  # a wrong checksum is no IBAN
    assert found.find("+44 20 7946 0958") == "a phone number"
    assert found.find("4242 4242 4242 4242") == "a card number"
    assert found.find("jane.doe@example.com") == "an e-mail address"
    assert found.find("retried 12 times in 30 s") is None


@pytest.fixture
async def uow(database_url: str) -> AsyncIterator[SqlUnitOfWorkFactory]:
    engine = create_engine(database_url)
    yield SqlUnitOfWorkFactory(engine)
    await engine.dispose()


async def stored(uow: SqlUnitOfWorkFactory) -> list[str]:
    async with uow.reader() as reader:
        return [row[0] for row in await reader.session.execute(sa.text("SELECT text FROM memories"))]


async def test_the_gateway_refuses_each_form_and_stores_nothing(uow: SqlUnitOfWorkFactory) -> None:
    gateway = MemoryGateway(uow, utcnow)
    where = MemoryScope("default", "world", None, uuid.uuid4(), uuid.uuid4())
    for text in PERSONAL:
        with pytest.raises(MemoryRefused) as refused:
            await gateway.remember(where, text, MemoryTier.PERSISTENT, MemoryKind.OBSERVATION, [])
        assert refused.value.code == "MEMORY_PERSONAL_DATA", text
    assert await stored(uow) == []
    for text in META:
        await gateway.remember(where, text, MemoryTier.PERSISTENT, MemoryKind.PATTERN, [])
    assert sorted(await stored(uow)) == sorted(META)
