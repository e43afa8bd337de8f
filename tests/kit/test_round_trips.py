"""The database's share of an approval turn, counted: the round trips to PostgreSQL (socket writes)
of one handed-off approval turn (`bench/round_trips.py`) are at most the pin in
bench/round_trips_pin.json. The count does not depend on the machine: only the statements a turn
sends decide it, so a change that adds one fails here. A change that cuts some lowers the pin too,
so the guard stays tight."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from tests.conftest import PG_URL

ROOT = Path(__file__).resolve().parents[2]
PIN = json.loads((ROOT / "bench" / "round_trips_pin.json").read_text())["round_trips"]


def test_round_trips_per_handed_off_approval_turn_stay_at_the_pin() -> None:
    url = sa.make_url(PG_URL)
    scratch = url.set(database=f"{url.database}_round_trips").render_as_string(hide_password=False)
    done = subprocess.run(
        [sys.executable, "bench/round_trips.py", "--turns", "3"],
        cwd=ROOT,
        env={**os.environ, "BENCH_PG_URL": scratch},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    measured = figures["round_trips"]
    assert measured <= PIN, (
        f"a handed-off approval turn now makes {measured} round trips to PostgreSQL, over the pinned "
        f"{PIN}:\n{done.stdout}"
    )
    assert measured >= PIN - 1, (
        f"a handed-off approval turn now makes {measured} round trips to PostgreSQL, under the pinned "
        f"{PIN}: lower the pin in bench/round_trips_pin.json so that it keeps guarding the new figure"
    )
