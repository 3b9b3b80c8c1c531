"""How long the supervisor waits before restarting a node that died."""

from __future__ import annotations

from dataclasses import dataclass

FIRST_S = 1.0
MAX_S = 30.0
# A node that ran this long was healthy: its next death starts over at FIRST_S
# (one crash an hour is not a crash loop).
STABLE_AFTER_S = 60.0


@dataclass(slots=True)
class RestartBackoff:
    """1 s, doubling to 30 s while a node keeps dying soon after each start."""

    first_s: float = FIRST_S
    max_s: float = MAX_S
    stable_after_s: float = STABLE_AFTER_S
    _next_s: float = 0.0

    def next_delay(self, ran_for_s: float) -> float:
        """The wait before the restart of a node that ran ``ran_for_s`` seconds."""
        if not self._next_s or ran_for_s >= self.stable_after_s:
            self._next_s = self.first_s
        delay = self._next_s
        self._next_s = min(delay * 2, self.max_s)
        return delay
