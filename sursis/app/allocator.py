"""A long-running process gives freed memory back to the system (glibc's allocator only).

glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), and its trim
threshold with it: from then on large blocks come from the heap, and the heap is only given back
when its top is free and larger than the raised threshold. A process that serves turns for days
then keeps, as resident memory, space it freed long ago. `sursis serve` and `sursis worker` fix both
thresholds at glibc's own starting value (128 KiB), as `MALLOC_MMAP_THRESHOLD_=131072
MALLOC_TRIM_THRESHOLD_=131072` would; an operator who sets either variable keeps that choice.
The figures are in docs/performance-history.md ("Freed memory goes back to the system").
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 128 * 1024
OPERATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def return_freed_memory(environ: Mapping[str, str] | None = None) -> bool:
    """Fix glibc's mmap and trim thresholds at 128 KiB; True when they were set. Nothing happens
    off Linux, on a C library without `mallopt` (musl), or when the operator set either variable."""
    environ = os.environ if environ is None else environ
    if sys.platform != "linux" or any(name in environ for name in OPERATOR_VARIABLES):
        return False
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mmap_set: int = mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES)
    trim_set: int = mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES)
    return mmap_set == 1 and trim_set == 1
