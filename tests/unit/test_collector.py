"""`serve` and `worker` settle the garbage collector once started: start-up's objects frozen, the
young generation collected every 5,000 allocations. Each case is a fresh interpreter: the
collector's state is the process's, and this test process keeps Python's defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sursis.app.collector import YOUNG_THRESHOLD

SETTLED = """
import gc, json
from sursis import settle_collector  # public: an embedding program may settle its own process
before = [gc.get_threshold(), gc.get_freeze_count()]
settle_collector()
print(json.dumps([before, [gc.get_threshold(), gc.get_freeze_count()]]))
"""

# `sursis serve` as the command runs it, up to the point where the HTTP server would take over.
SERVE = """
import gc, json, sys
import sursis.app.quiet_server

def serve(app, options):
    print(json.dumps([type(app).__name__, gc.get_threshold(), gc.get_freeze_count()]))
    return True

sursis.app.quiet_server.serve = serve
from sursis.app.cli import main
sys.exit(main(["serve", "--port", "0", "--agents", "assistant"]))
"""


def in_a_fresh_interpreter(probe: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", **env},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_settling_freezes_start_up_and_raises_only_the_young_threshold() -> None:
    (threshold, frozen), (settled, frozen_after) = json.loads(in_a_fresh_interpreter(SETTLED))
    assert threshold == [700, 10, 10] and frozen == 0  # Python's own, before
    assert settled == [YOUNG_THRESHOLD, 10, 10]
    assert frozen_after > 10_000, "the modules' objects were not frozen"


def test_serve_settles_the_collector_before_it_serves(tmp_path: Path) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    shown = in_a_fresh_interpreter(SERVE, SURSIS_DATABASE_URL=database, SURSIS_MODEL="scripted")
    app, threshold, frozen = json.loads(shown)
    assert app == "Litestar"
    assert threshold[0] == YOUNG_THRESHOLD
    assert frozen > 100_000, f"start-up's objects (the app's modules) were not frozen: {frozen}"
