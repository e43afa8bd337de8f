"""Where an approval turn's CPU goes, attributed: a native sampling profile (py-spy, with C frames)
of the in-process turn of `bench/cpu_per_turn.py` on PostgreSQL, start-up and warm-up left out.

    .venv/bin/python bench/profile_native.py [--turns 400] [--rate 250] [--raw PATH]

py-spy attaches to the bench's process once its warm turns are done (`cpu_per_turn.py --gate`) and
samples every thread until the process exits. Idle samples (the loop waiting in `epoll_wait`, a thread
waiting for a lock) are dropped; each busy sample is given to the deepest frame that says whose it is:
a `send`/`recv` system call (talking to PostgreSQL), the garbage collector, or else the package of the
innermost Python frame (pydantic-ai with pydantic-graph, Sursis, asyncio's loop, SQLAlchemy, asyncpg,
...). Prints the table, then one JSON line with every share and the turn's CPU from the bench.
Needs py-spy (the `peers` extra; `make bench-profile` installs it) and the right to ptrace (root, or
`kernel.yama.ptrace_scope=0`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
IDLE = (
    "epoll_wait",
    "select_epoll_poll_impl",
    "PyThread_acquire_lock_timed",
    "sem_timedwait",
    "pthread_cond",
)
SYSCALLS = re.compile(r"^(send|recv|sendto|recvfrom|sendmsg|recvmsg|__libc_send|__libc_recv|sock_call_ex)\b")
GROUPS = {
    "pydantic_ai": "pydantic-ai",
    "pydantic_graph": "pydantic-ai",
    "sursis": "Sursis",
    "asyncio": "asyncio's loop",
    "_asynciomodule.c": "asyncio's loop",
    "sqlalchemy": "SQLAlchemy",
    "asyncpg": "asyncpg",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
}
FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def owner(frames: list[str]) -> str | None:
    """Whose a sample is (None: idle), from its frames, outermost first."""
    if any(frame.startswith(IDLE) for frame in frames[-4:]):
        return None
    for frame in reversed(frames[-4:]):
        if SYSCALLS.match(frame):
            return "send/recv system calls"
    if any(frame.startswith("gc_collect_main") for frame in frames):
        return "the garbage collector"
    for frame in reversed(frames):
        match = FRAME.match(frame)
        if match is None:
            continue
        file = match["file"]
        if file.endswith(".c") and file in GROUPS:
            return GROUPS[file]
        if not file.endswith(".py"):
            continue  # a C function of the interpreter or a library: its Python caller says whose
        package = file.split("/", 1)[0] if "/" in file else Path(file).stem
        return GROUPS.get(package, package.removesuffix(".py"))
    return "other"


def shares(raw: Path) -> tuple[Counter[str], int]:
    """Busy samples by owner, and the idle samples dropped."""
    busy: Counter[str] = Counter()
    idle = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        who = owner(stack.split(";"))
        if who is None:
            idle += int(count)
        else:
            busy[who] += int(count)
    return busy, idle


def profile(turns: int, rate: int, raw: Path) -> dict[str, object]:
    """Run the gated bench, attach py-spy after its warm-up, and return the bench's JSON figures."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy (make bench-profile does)")
    bench = subprocess.Popen(
        [sys.executable, str(HERE / "cpu_per_turn.py"), "--turns", str(turns), "--gate"],
        cwd=HERE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert bench.stdin is not None
    assert bench.stdout is not None
    while (line := bench.stdout.readline()) and line.strip() != "READY":
        pass
    command = [spy, "record", "--pid", str(bench.pid), "--native", "--format", "raw", "--rate", str(rate)]
    sampler = subprocess.Popen(
        [*command, "-o", str(raw)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)  # py-spy attaches before the measured turns start
    bench.stdin.write("\n")
    bench.stdin.flush()
    figures = json.loads(bench.stdout.read().strip().splitlines()[-1])
    bench.wait()
    _, errors = sampler.communicate(timeout=60)
    if sampler.returncode not in (0, None) or not raw.exists():
        raise SystemExit(f"py-spy failed: {errors.strip()[-500:]}")
    return dict(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--rate", type=int, default=250, help="samples a second")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw stacks here")
    args = parser.parse_args()
    raw = args.raw or Path(tempfile.mkdtemp(prefix="sursis-profile-")) / "stacks.txt"
    figures = profile(args.turns, args.rate, raw)
    busy, idle = shares(raw)
    total = sum(busy.values()) or 1
    cpu_ms = float(str(figures["cpu_ms_per_turn"]))
    print(f"approval turn, in process, PostgreSQL: {cpu_ms} ms CPU a turn over {args.turns} turns")
    print(f"{total} busy samples ({idle} idle dropped), load average {os.getloadavg()[0]:.2f}")
    print(f"{'where the CPU goes (deepest known frame)':<44} {'share':>7} {'ms/turn':>8}")
    table = {}
    for who, count in busy.most_common(14):
        share = count / total
        table[who] = round(share * 100, 1)
        print(f"{who:<44} {share * 100:>6.1f}% {share * cpu_ms:>8.2f}")
    rest = 1 - sum(busy[who] for who in table) / total
    print(f"{'the rest':<44} {rest * 100:>6.1f}% {rest * cpu_ms:>8.2f}")
    print(json.dumps({"shares_percent": table, "rest_percent": round(rest * 100, 1), **figures}))


if __name__ == "__main__":
    main()
