"""`serve` and `worker` give freed memory back to the system: glibc's thresholds fixed at 128 KiB.

Each case is a fresh interpreter: the thresholds are process-wide, and glibc raises them for good
once a large block it mapped is freed, which is what the probe does first.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from sursis.app.allocator import return_freed_memory

PROBE = """
import pathlib, sys
from sursis.app.allocator import return_freed_memory

def rss_mib():
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

if sys.argv[1] == "fixed":
    assert return_freed_memory({}), "the thresholds were not set"
big = bytearray(8 << 20)  # mapped, and once freed glibc raises its thresholds to its size
del big
before = rss_mib()
blocks = [bytearray(256 << 10) for _ in range(200)]  # 50 MiB in blocks a raised threshold puts on the heap
kept = blocks[-1]  # the heap's top stays in use
del blocks
print(rss_mib() - before)
"""

glibc = sys.platform == "linux" and getattr(ctypes.CDLL(None), "mallopt", None) is not None


def still_resident_mib(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


@pytest.mark.skipif(not glibc, reason="the thresholds are glibc's")
def test_memory_freed_after_a_large_block_is_given_back_with_the_thresholds_fixed() -> None:
    default, fixed = still_resident_mib("default"), still_resident_mib("fixed")
    assert default > 40, f"glibc's own thresholds keep the freed blocks resident: {default:.1f} MiB"
    assert fixed < 5, f"with the thresholds fixed the freed blocks go back: {fixed:.1f} MiB"


def test_an_operators_own_malloc_variables_are_left_alone() -> None:
    assert return_freed_memory({"MALLOC_TRIM_THRESHOLD_": "1048576"}) is False
    assert return_freed_memory({"MALLOC_MMAP_THRESHOLD_": "65536"}) is False
