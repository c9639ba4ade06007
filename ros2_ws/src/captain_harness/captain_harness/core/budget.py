"""Episode budgets: requests, physical actions and wall time (paper defaults)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BudgetLimits:
    """Limits of one episode. Paper settings: 60 requests, 150 physical actions (120 in
    RL), 1,080 s of wall time."""

    max_requests: int = 60
    max_physical_actions: int = 150
    max_wall_time_s: float = 1080.0


@dataclass
class Budget:
    """Counters against ``BudgetLimits``. The wall clock starts at construction."""

    limits: BudgetLimits = field(default_factory=BudgetLimits)
    requests_used: int = 0
    physical_actions_used: int = 0
    started_at_s: float = field(default_factory=time.monotonic)

    def wall_time_used_s(self) -> float:
        """Seconds since the episode started."""
        return time.monotonic() - self.started_at_s

    def physical_actions_left(self) -> int:
        """Physical actions that may still be executed."""
        return max(0, self.limits.max_physical_actions - self.physical_actions_used)

    def requests_left(self) -> int:
        """Model requests that may still be made."""
        return max(0, self.limits.max_requests - self.requests_used)

    def wall_time_left_s(self) -> float:
        """Seconds of wall time left."""
        return max(0.0, self.limits.max_wall_time_s - self.wall_time_used_s())

    def exhausted(self) -> str | None:
        """The name of the first exhausted budget ("requests", "physical_actions",
        "wall_time"), or None."""
        if self.requests_used >= self.limits.max_requests:
            return "requests"
        if self.physical_actions_used >= self.limits.max_physical_actions:
            return "physical_actions"
        if self.wall_time_used_s() >= self.limits.max_wall_time_s:
            return "wall_time"
        return None

    def to_dict(self) -> dict[str, Any]:
        """The ``budget`` entry of every result dict."""
        return {
            "requests_used": self.requests_used,
            "requests_left": self.requests_left(),
            "physical_actions_used": self.physical_actions_used,
            "physical_actions_left": self.physical_actions_left(),
            "wall_time_used_s": round(self.wall_time_used_s(), 3),
            "wall_time_left_s": round(self.wall_time_left_s(), 3),
        }
