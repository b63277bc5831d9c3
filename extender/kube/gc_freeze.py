"""Keeping what the informer applies out of Python's full garbage collections.

Apart from the informer because it is about the interpreter's collector, not about
lists and watches: the informer says when (after each page of a list, and every
`FREEZE_EVERY` objects its watches add); this module says what a freeze does and why.
"""

from __future__ import annotations

import gc

# Objects added by watch events between two freezes (below). A freeze first collects
# what is not yet frozen, about this many objects' worth: a few ms.
FREEZE_EVERY = 2000


def keep_out_of_collections() -> None:
    """The objects a list applies mostly live as long as the process. Python's full
    collection runs each time the tracked objects grow by a quarter and walks all of
    them: during a list of 20,000 PodGroups and 40,000 pods that was 0.9 s of event
    loop, several times, and growing with the history. After each page, what is left
    of it is frozen: moved out of every later collection. The page's own garbage is
    collected first, as frozen garbage is never freed, and an HTTP response sits in
    reference cycles with its body; that collection walks only what was made since the
    last freeze, about one page."""
    gc.collect()
    gc.freeze()


class Freezer:
    """Freezes once every `every` objects added by watch events, as a list does per page.
    Objects that arrive one by one (a history created while the extender runs) would
    otherwise pile up outside the frozen set, and each full collection would walk all
    of them: 75 ms of CPU after 20,000 PodGroups and 40,000 pods, growing with them.

    Why per added object and not per event or per second: a freeze also keeps whatever
    cyclic garbage is alive at that moment (a request in flight) from ever being freed,
    so freezes are spent only where the tracked heap grows. A cluster whose pods come
    and go at 10 a second freezes every few minutes; one modification or deletion never
    counts."""

    __slots__ = ("added", "every")

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self.added = 0

    def count(self) -> None:
        self.added += 1
        if self.added >= self.every:
            self.reset()
            keep_out_of_collections()

    def reset(self) -> None:
        """Called on every freeze, whatever made it."""
        self.added = 0
