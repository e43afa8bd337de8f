"""`make bench` keeps working: its runner and storage parts, a few turns on a scratch SQLite file."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bench  # noqa: E402


async def test_the_runner_part_samples_turns_counts_commits_and_statements_and_measures_storage(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.db'}"
    samples, marks = await bench.per_turn_runner(url, (1, 3, 6), window=2, storage_marks=[1, 3, 5])
    assert sorted(samples) == [1, 3, 6]
    for window in samples.values():
        assert len(window.turn) == 2
        assert all(ms > 0 for ms in window.turn)
        # A suspend commits at least the queued run and the suspension; a resume the decision,
        # the claim and the completion.
        assert min(window.suspend_commits) >= 2
        assert min(window.resume_commits) >= 3
        # Every commit ends a transaction of at least one statement; the bench's reads are not counted.
        assert min(window.suspend_statements) >= max(window.suspend_commits) + 2
        assert min(window.resume_statements) >= max(window.resume_commits) + 3
    assert [m.turn for m in marks] == [1, 3, 5]
    # Every approval turn writes the same rows.
    assert marks[2].rows - marks[1].rows == marks[1].rows - marks[0].rows > 0
    assert marks[2].row_bytes > marks[1].row_bytes > marks[0].row_bytes
