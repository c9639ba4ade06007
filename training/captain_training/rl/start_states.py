"""Start-state pools of RL rounds (paper §3.3, Appendix E).

A round draws ``start_states_per_round`` start states; each is rolled out ``group_size``
(G = 4) times, and the rollouts from one start state form a group (the group-relative
term of the advantage compares them). A start state is either

* an official initial state of the task (LIBERO: indices 0..49), never one of the
  held-out evaluation states 11..16, or
* a wide-layout random start: a seeded layout (LIBERO: ``random_layout``) with light,
  camera-pose and material randomisation drawn from the same seed.

The draw is a deterministic function of (seed, round), so a resumed run draws the same
start states. Which backend factory builds an episode follows from the start state
(``captain_training.rl.backends``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from captain_training.rl.errors import ConfigError

#: Official initial states per LIBERO task.
OFFICIAL_STATES_PER_TASK = 50
#: Share of wide-layout starts in the paper's pool: 5,600 wide-layout + 1,760 official states.
PAPER_WIDE_LAYOUT_FRACTION = 5600 / (5600 + 1760)
#: Held-out evaluation states, never drawn for training.
HELDOUT_EVAL_STATES: tuple[int, ...] = (11, 12, 13, 14, 15, 16)


@dataclass(frozen=True)
class StartState:
    """One start state of a group.

    Attributes:
        task: ``"<suite>/<task>"``.
        init_state: official initial-state index, or -1 for a wide-layout start.
        seed: the wide layout's seed (None for an official state).
        randomize_appearance: light, camera pose and materials randomised (wide layouts).
    """

    task: str
    init_state: int = -1
    seed: int | None = None
    randomize_appearance: bool = False

    def __post_init__(self) -> None:
        if self.init_state < 0 and self.seed is None:
            raise ConfigError(f"start state of {self.task}: give an official init_state >= 0 or a layout seed")

    @property
    def wide_layout(self) -> bool:
        return self.init_state < 0

    @property
    def key(self) -> str:
        """The group key: ``libero_goal/3@official-7`` or ``tabletop/stack_cubes@wide-123456``."""
        return f"{self.task}@official-{self.init_state}" if not self.wide_layout else f"{self.task}@wide-{self.seed}"

    def to_dict(self) -> dict:
        return {"task": self.task, "init_state": self.init_state, "seed": self.seed,
                "randomize_appearance": self.randomize_appearance}

    @classmethod
    def from_dict(cls, data: dict) -> StartState:
        return cls(str(data["task"]), int(data.get("init_state", -1)), data.get("seed"),
                   bool(data.get("randomize_appearance", False)))


@dataclass(frozen=True)
class StartStatePool:
    """Where a round's start states come from.

    Attributes:
        tasks: ``"<suite>/<task>"`` names drawn uniformly.
        official_states: official initial-state indices that may be drawn (the held-out
            ``excluded_states`` are removed; an explicit request for one is an error).
        excluded_states: never drawn (evaluation states 11..16).
        wide_layout_fraction: probability that a start state is a wide-layout random start,
            in [0, 1] (default: the paper's 5,600 / 7,360 = 0.761).
        randomize_appearance: light/camera/material randomisation on wide layouts.
    """

    tasks: tuple[str, ...]
    official_states: tuple[int, ...] = tuple(range(OFFICIAL_STATES_PER_TASK))
    excluded_states: tuple[int, ...] = HELDOUT_EVAL_STATES
    wide_layout_fraction: float = PAPER_WIDE_LAYOUT_FRACTION
    randomize_appearance: bool = True
    _allowed: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ConfigError("the start-state pool needs at least one task (rollout.tasks)")
        if not 0.0 <= self.wide_layout_fraction <= 1.0:
            raise ConfigError(f"wide_layout_fraction must be in [0, 1], got {self.wide_layout_fraction}")
        allowed = tuple(s for s in self.official_states if s not in set(self.excluded_states))
        if any(s < 0 for s in allowed):
            raise ConfigError(f"official states must be >= 0, got {sorted(allowed)[:3]}")
        if not allowed and self.wide_layout_fraction < 1.0:
            raise ConfigError("no official state is left after removing the held-out ones; set "
                              "wide_layout_fraction: 1.0 or list official_states")
        object.__setattr__(self, "_allowed", allowed)

    def draw(self, n: int, seed: int, round_index: int, exclude: frozenset[str] = frozenset()
             ) -> list[StartState]:
        """``n`` start states for round ``round_index`` (deterministic in (seed, round)); starts whose
        ``key`` is in ``exclude`` (degenerate ones) are drawn again."""
        rng = np.random.default_rng([int(seed), int(round_index), 0x5747])
        out: list[StartState] = []
        for _ in range(100 * int(n) + 100):
            if len(out) == int(n):
                break
            task = self.tasks[int(rng.integers(len(self.tasks)))]
            if not self._allowed or rng.random() < self.wide_layout_fraction:
                start = StartState(task, -1, int(rng.integers(2**31 - 1)), self.randomize_appearance)
            else:
                start = StartState(task, int(self._allowed[int(rng.integers(len(self._allowed)))]))
            if start.key not in exclude:
                out.append(start)
        if len(out) < int(n):
            raise ConfigError(f"only {len(out)} of {n} start states left after excluding {len(exclude)} degenerate "
                              "ones; widen official_states or the wide-layout share")
        return out


def check_not_heldout(states: Sequence[StartState], excluded: Sequence[int] = HELDOUT_EVAL_STATES) -> None:
    """Raise when a training start state is a held-out evaluation state."""
    bad = [s.key for s in states if not s.wide_layout and s.init_state in set(excluded)]
    if bad:
        raise ConfigError(f"held-out evaluation states drawn for training: {bad}")


#: An object this far (m) below every other object of the scene at reset has fallen off the table.
OFF_TABLE_DROP_M = 0.08
#: The task's target or destination tilted more than this (rad) at reset is not standing as laid out.
MAX_RESET_TILT_RAD = 0.7854
#: ``end_reason`` of an episode stopped before its first request because its start is degenerate.
DEGENERATE_START = "degenerate_start"


def degenerate_reason(snapshot: object) -> str | None:
    """Why a start state is degenerate (``off_table:<obj>`` / ``tilted:<obj>``), from the hidden
    snapshot at reset, or None. Such starts are removed from the pool (``StartStatePool.draw``'s
    ``exclude``) and counted by the trainer."""
    import math

    poses = getattr(snapshot, "object_poses", {}) or {}
    if not poses:
        return None
    heights = {name: float(p.position_m[2]) for name, p in poses.items()}
    for name, z in sorted(heights.items()):
        others = [h for other, h in heights.items() if other != name]
        if others and z < min(others) - OFF_TABLE_DROP_M:  # far below every other object: on the floor
            return f"off_table:{name}"
    for name in (getattr(snapshot, "target_object", ""), getattr(snapshot, "destination", "")):
        if name and name in poses:
            _, x, y, _ = (float(v) for v in poses[name].quaternion_wxyz)
            cos_tilt = 1.0 - 2.0 * (x * x + y * y)  # body z axis against world z
            if math.acos(max(-1.0, min(1.0, cos_tilt))) > MAX_RESET_TILT_RAD:
                return f"tilted:{name}"
    return None
