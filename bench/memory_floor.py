"""The memory floor: the resident set size of a Python process that only imports the libraries the
service is built on (pydantic-ai, Litestar, SQLAlchemy with its asyncio extension, asyncpg,
OpenTelemetry's API and SDK tracer, structlog) and does nothing else. Whatever `sursis serve` holds
above it is the service's own: its code, its caches, its connections. `memory.py` prints it beside
`serve`'s RSS after its turns.

Each sample is a fresh interpreter (`sys.executable`, so the service's venv and its versions) that
imports the list and reports its VmRSS; the report is the median of `--samples`.

    .venv/bin/python bench/memory_floor.py [--samples 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

IMPORTS = (
    "pydantic_ai",
    "litestar",
    "sqlalchemy",
    "sqlalchemy.ext.asyncio",
    "asyncpg",
    "opentelemetry.trace",
    "opentelemetry.sdk.trace",
    "structlog",
)

PROBE = f"""
import importlib, pathlib
for name in {IMPORTS!r}:
    importlib.import_module(name)
for line in pathlib.Path("/proc/self/status").read_text().splitlines():
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]) / 1024)
"""


def floor_mib(samples: int = 3) -> float:
    """The median VmRSS in MiB of `samples` fresh interpreters that import `IMPORTS` and stop."""
    readings = []
    for _ in range(samples):
        done = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
        )
        readings.append(float(done.stdout.strip()))
    return round(statistics.median(readings), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args()
    floor = floor_mib(args.samples)
    print(f"memory floor: a process importing only {', '.join(IMPORTS)}: {floor} MiB (VmRSS)")
    print(json.dumps({"memory_floor_mib": floor}))


if __name__ == "__main__":
    main()
