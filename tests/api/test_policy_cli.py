"""`sursis policy get | set | simulate` against the real app over a socket."""

from __future__ import annotations

import json
from pathlib import Path

from tests.api.conftest import LiveFactory
from tests.api.test_pending_cli import sursis, suspended_call
from tests.conftest import KeyMaker

DOCUMENT = {
    "comment": "replays wait for the SRE group",
    "rules": [
        {"id": "replays", "effect": "ask", "tools": ["replay_dlq_event"], "route": {"groups": ["sre"]}}
    ],
}


async def test_an_admin_sets_gets_and_simulates_a_policy(
    live: LiveFactory, keys: KeyMaker, tmp_path: Path
) -> None:
    admin = await keys.make("admin", "default", name="root")
    operator = await keys.make("operator", "default", name="alice")
    document = tmp_path / "policy.json"
    document.write_text(json.dumps(DOCUMENT))
    async with live() as app:
        await suspended_call(app.http)

        code, out, err = await sursis("policy", "set", str(document), url=app.base_url, key=admin)
        assert code == 0, err
        assert out.strip() == "stored version 1 of default (1 rules)"

        code, out, err = await sursis("policy", "get", "--json", url=app.base_url, key=admin)
        assert code == 0, err
        shown = json.loads(out)
        assert (shown["version"], shown["rules"][0]["route"]["groups"]) == (1, ["sre"])

        code, out, err = await sursis(
            "policy",
            "simulate",
            str(document),
            "--since",
            "2026-01-01T00:00:00Z",
            url=app.base_url,
            key=admin,
        )
        assert code == 0, err
        assert "1 calls from" in out and "0 would change" in out

        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"rules": [{"id": "x", "effect": "allow", "when": "context.nope"}]}))
        code, out, err = await sursis("policy", "set", str(bad), url=app.base_url, key=admin)
        assert code == 2
        assert err.startswith("sursis: invalid_policy:") and "rules.0.when" in err

        code, out, err = await sursis("policy", "get", url=app.base_url, key=operator)
        assert code == 2 and "forbidden" in err
