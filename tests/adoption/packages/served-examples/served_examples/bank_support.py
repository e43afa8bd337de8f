"""`pydantic_ai_examples.bank_support`: the example's own deps over an SQLite customers table, its
`customer_balance` tool gated."""

from __future__ import annotations

import sqlite3

from pydantic_ai_examples import bank_support as example

from sursis import RunInfo, ToolOptions, adopt

CUSTOMERS = sqlite3.connect(":memory:", check_same_thread=False)
CUSTOMERS.execute("CREATE TABLE customers(id, name, balance)")
CUSTOMERS.execute("INSERT INTO customers VALUES (123, 'John', 123.45)")
CUSTOMERS.commit()
# The example's `DatabaseConn` queries the module's `cur`, which only its `__main__` block sets.
example.cur = CUSTOMERS.cursor()  # type: ignore[attr-defined]


def bank_deps(info: RunInfo) -> example.SupportDependencies:
    return example.SupportDependencies(customer_id=123, db=example.DatabaseConn(sqlite_conn=CUSTOMERS))


AGENT = adopt(
    example.support_agent,
    name="bank-support",
    model="scripted",
    deps=bank_deps,
    tools={
        "customer_balance": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Read the customer's balance"
        )
    },
)
