"""The cost of an approval turn, counted rather than timed: the Python function calls per turn of
Sursis's whole durable turn (`make bench-calls`, bench/calls.py), its message posted with `stream`
off and on, stay within 5 % above the pinned figures in bench/calls_pin.json. The count is the same
on every machine, so this guards the cost in CI without a timing assertion. A change that lowers a
count by more than 10 % lowers its pin too, so the guard stays tight."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from tests.conftest import PG_URL

ROOT = Path(__file__).resolve().parents[2]
PINS = json.loads((ROOT / "bench" / "calls_pin.json").read_text())
SIDES = ("ours", "streamed")


def test_python_calls_per_approval_turn_stay_within_five_percent_of_the_pin() -> None:
    url = sa.make_url(PG_URL)
    scratch = url.set(database=f"{url.database}_calls").render_as_string(hide_password=False)
    done = subprocess.run(
        [sys.executable, "bench/calls.py", "--sides", *SIDES],
        cwd=ROOT,
        env={**os.environ, "BENCH_PG_URL": scratch},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for side in SIDES:
        measured, pin = figures[side], PINS[side]
        assert measured <= pin * 1.05, (
            f"an approval turn ({side}) now makes {measured:,.0f} Python calls, more than 5 % over "
            f"the pinned {pin:,}:\n{done.stdout}"
        )
        assert measured >= pin * 0.90, (
            f"an approval turn ({side}) now makes {measured:,.0f} Python calls, over 10 % under the "
            f"pinned {pin:,}: lower the pin in bench/calls_pin.json so that it keeps guarding the new figure"
        )
