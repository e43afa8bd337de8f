"""The readiness gate's sandbox: predicate code runs in a separate, resource-limited process.

Never in the service's interpreter. The child is a fresh `python -I` with a CPU-time limit
(`RLIMIT_CPU`), an address-space limit (`RLIMIT_AS`), no core dumps and no file writes, and the
parent kills it at a wall-clock timeout. The code runs with an allow-list of builtins only (the
static check already refused everything else); whatever it does, the worst outcome is a failed
gate: a loop, a huge allocation or a crash ends the child, never the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from dataclasses import dataclass
from typing import Any

from sursis.domain.worlds.predicates import ALLOWED_BUILTINS

CHILD = r"""
import builtins, json, resource, sys
job = json.loads(sys.stdin.read())
for name, value in job["limits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))
safe = {name: getattr(builtins, name) for name in job["builtins"] if hasattr(builtins, name)}
namespace = {"__builtins__": safe}
out = {"cases": []}
try:
    exec(compile(job["code"], "<predicate>", "exec"), namespace)
    fn = namespace[job["function"]]
except BaseException as exc:
    out["error"] = type(exc).__name__ + ": " + str(exc)[:300]
else:
    for case in job["cases"]:
        try:
            value = fn(case["context"])
            ok = isinstance(value, bool) and value == case["expected"]
            shown = value if isinstance(value, bool) else repr(value)[:100]
            out["cases"].append({"expected": case["expected"], "actual": shown, "passed": ok})
        except BaseException as exc:
            error = type(exc).__name__ + ": " + str(exc)[:300]
            out["cases"].append({"expected": case["expected"], "error": error, "passed": False})
sys.stdout.write(json.dumps(out))
"""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    cpu_seconds: int = 2
    memory_bytes: int = 512 * 1024 * 1024
    wall_seconds: float = 10.0
    max_output_bytes: int = 1_000_000


@dataclass(frozen=True, slots=True)
class SandboxOutcome:
    passed: bool
    cases: list[dict[str, Any]]
    error: str | None


def _rlimits(limits: SandboxLimits) -> dict[str, int]:
    """Set by the child on itself (hard and soft) before it reads any code: it cannot raise them again."""
    return {
        "RLIMIT_CPU": limits.cpu_seconds,
        "RLIMIT_AS": limits.memory_bytes,
        "RLIMIT_CORE": 0,
        "RLIMIT_FSIZE": 0,
        "RLIMIT_NOFILE": 16,
    }


async def run_in_sandbox(
    code: str, function: str, cases: list[dict[str, Any]], limits: SandboxLimits | None = None
) -> SandboxOutcome:
    """Run `function` from `code` on each case in a child process; a misbehaving child fails the gate."""
    limits = limits or SandboxLimits()
    job = json.dumps(
        {
            "code": code,
            "function": function,
            "cases": cases,
            "builtins": sorted(ALLOWED_BUILTINS),
            "limits": _rlimits(limits),
        }
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        "-c",
        CHILD,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={},
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(job.encode()), limits.wall_seconds)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        return SandboxOutcome(False, [], f"the predicate ran longer than {limits.wall_seconds:g} s (killed)")
    if process.returncode != 0:
        return SandboxOutcome(False, [], _death(process.returncode, stderr, limits))
    try:
        result = json.loads(stdout[: limits.max_output_bytes])
    except ValueError:
        return SandboxOutcome(False, [], "the predicate process gave no readable result")
    if "error" in result:
        return SandboxOutcome(False, [], f"the code could not be loaded: {result['error']}")
    case_results: list[dict[str, Any]] = result["cases"]
    return SandboxOutcome(bool(case_results) and all(c["passed"] for c in case_results), case_results, None)


def _death(returncode: int | None, stderr: bytes, limits: SandboxLimits) -> str:
    if returncode is not None and returncode < 0:
        signal_number = -returncode
        if signal_number in (signal.SIGKILL, signal.SIGXCPU):
            return f"the predicate used more than {limits.cpu_seconds} s of CPU time (killed)"
        return f"the predicate process died (signal {signal_number})"
    tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    if "MemoryError" in tail[0]:
        return f"the predicate needed more than {limits.memory_bytes // (1024 * 1024)} MiB of memory"
    return f"the predicate process failed: {tail[0][:300]}"
