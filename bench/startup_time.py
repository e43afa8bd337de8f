"""How long the command line takes to start: `sursis --help`, and `sursis migrate` on a database
already at the head (what a deploy runs before every start), each in a fresh interpreter.

Two figures per command, medians of `--rounds`: the wall time of the whole process, and the
cumulative import time `python -X importtime` reports for it (the sum of its top-level imports,
steadier than the wall time on a loaded machine, which it otherwise follows).

    .venv/bin/python bench/startup_time.py [--rounds 7] [--source PATH]

`--source` runs the `sursis` package of another tree (a `git worktree` of an older commit, for a
before/after), with this interpreter and its libraries.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {"help": ["--help"], "migrate": ["migrate"]}
SURSIS = str(Path(sys.executable).with_name("sursis"))


def run_once(argv: list[str], env: dict[str, str], cwd: str, *, importtime: bool) -> tuple[float, float]:
    # The `sursis` script beside this interpreter, run by it so that `-X importtime` applies.
    """Wall seconds of one `sursis ARGV`, and its cumulative import seconds (0 when not asked)."""
    flags = ["-X", "importtime"] if importtime else []
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, SURSIS, *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sursis {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    imported = 0
    for line in done.stderr.splitlines():
        # "import time: self | cumulative | name": a top-level import has one space before its name.
        parts = line.split("|")
        top_level = len(parts) == 3 and parts[2].startswith(" ") and parts[2][1:2] not in (" ", "")
        if line.startswith("import time:") and top_level and parts[1].strip().isdigit():
            imported += int(parts[1])
    return wall, imported / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--source", type=Path, help="a tree whose `sursis` package to run")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    if args.source is not None:
        env["PYTHONPATH"] = str(args.source.resolve())
    env["PYTHONPATH"] = env.get("PYTHONPATH") or str(Path(__file__).resolve().parents[1])
    cwd = tempfile.mkdtemp(prefix="sursis-startup-")
    env["SURSIS_DATABASE_URL"] = f"sqlite+aiosqlite:///{Path(cwd) / 'startup.db'}"
    run_once(COMMANDS["migrate"], env, cwd, importtime=False)  # to the head, and warm the bytecode caches
    results: dict[str, dict[str, float]] = {}
    for name, argv in COMMANDS.items():
        walls, imports = [], []
        for _ in range(args.rounds):
            walls.append(run_once(argv, env, cwd, importtime=False)[0])
            imports.append(run_once(argv, env, cwd, importtime=True)[1])
        results[name] = {"wall_s": statistics.median(walls), "imports_s": statistics.median(imports)}
    print(f"{'command':16} {'wall (median)':>14} {'imports (median)':>17}   rounds: {args.rounds}")
    for name, figures in results.items():
        shown = "sursis " + " ".join(COMMANDS[name])
        print(f"{shown:16} {figures['wall_s']:>12.3f} s {figures['imports_s']:>15.3f} s")
    print(json.dumps({"bench": "startup_time", "rounds": args.rounds, **results}))


if __name__ == "__main__":
    main()
