"""A serving process collects garbage less often than Python's defaults would have it.

A turn allocates a few thousand container objects, most of them gone by the turn's end. With
Python's default, a young-generation collection runs every 700 allocations beyond deallocations,
about twice a turn, and each finds little to free: 1.9-2.1 ms of a turn's CPU went to collections.
`sursis serve` and `sursis worker`, once started, freeze what start-up built (the modules, the app:
about 190,000 objects that live as long as the process, which a full collection would otherwise walk
every time) and collect the young generation every 5,000 allocations instead, for about 3 MiB more
resident memory (cyclic garbage waits longer for its collection). An app that embeds
Sursis (`create_app`, `sursis.Service`) owns its process and is left alone; it may call
`sursis.settle_collector()` itself. The figures are in
docs/performance-history.md ("The collector runs less often").
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 5_000
"""Allocations beyond deallocations between two young-generation collections (Python's: 700)."""


def settle_collector() -> None:
    """Collect once, freeze every object that survives (start-up's), and raise the young
    generation's threshold to `YOUNG_THRESHOLD`; the older generations keep theirs."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
