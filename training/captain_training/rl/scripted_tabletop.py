"""A privileged scripted pick-and-place policy for the tabletop, with injected failures.

It reads the hidden snapshot (``wants_host_context``) only to plan, and acts like a model:
one python cell per request against the robot API (guarded ``move_to`` motions and jaw
commands), with perception-only requests (a robot-state read) interleaved, 0 to
``max_extra_looks`` extra ones after each step at random, so the request index does not
tell how far the episode got. Per episode it
may inject a perturbed grasp (the fingers close a few centimetres beside the cube) and/or
a perturbed placement (the cube is released beside the plate), each with its own
probability, so the same start state yields both successes and failures. After the
release it stops without a tool call (the host predicate decides the label).

Used to collect real simulator rollouts for the critic check (``critic_check.py``) and as a
fast stand-in teacher for the tabletop tasks ``cube_on_plate`` and ``pick_cube``.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest, ToolCall, new_call_id

#: Cell of a perception-only request (no physical action).
LOOK = "s = robot.get_robot_state()['value']\nprint(np.round(s['end_effector_position_m'], 3).tolist())"


def _quat_down(yaw_rad: float) -> list[float]:
    a = math.pi / 4 + yaw_rad / 2
    return [0.0, math.cos(a), math.sin(a), 0.0]


def _yaw(q_wxyz: Any) -> float:
    w, x, y, z = (float(v) for v in q_wxyz)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


class ScriptedTabletopPolicy(PolicyClient):
    """See the module docstring. ``grasp_error_rate`` / ``place_error_rate`` in [0, 1]."""

    name = "scripted-tabletop"
    wants_host_context = True

    def __init__(self, seed: int = 0, grasp_error_rate: float = 0.3, place_error_rate: float = 0.3,
                 max_extra_looks: int = 2) -> None:
        self.seed = int(seed)
        self.max_extra_looks = int(max_extra_looks)
        self.grasp_error_rate = float(grasp_error_rate)
        self.place_error_rate = float(place_error_rate)
        self.plans: dict[str, list[str]] = {}
        self.injected: dict[str, dict[str, bool]] = {}

    def _plan(self, episode_id: str, snap: Any) -> list[str]:
        from captain_backends.core.tabletop.scene import T_world_base

        digest = hashlib.sha256(f"{self.seed}:{episode_id}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
        base = T_world_base()[:3, 3]
        cube = np.asarray(snap.object_poses[snap.target_object].position_m) - base
        yaw = _yaw(snap.object_poses[snap.target_object].quaternion_wxyz) % (math.pi / 2)
        q = _quat_down(yaw)
        bad_grasp = rng.random() < self.grasp_error_rate
        bad_place = rng.random() < self.place_error_rate
        self.injected[episode_id] = {"grasp": bool(bad_grasp), "place": bool(bad_place)}
        grasp = cube.copy()
        if bad_grasp:
            angle = rng.uniform(0, 2 * math.pi)
            grasp[:2] += rng.uniform(0.035, 0.05) * np.array([math.cos(angle), math.sin(angle)])
        grasp_z = cube[2] + 0.01

        def fmt(v: Any) -> str:
            return "[" + ", ".join(f"{float(x):.4f}" for x in v) + "]"

        steps = [LOOK,
                 f"q = {q}\nr = robot.move_to({fmt([*grasp[:2], grasp_z + 0.12])}, q, speed=0.2)\nprint(r['success'])",
                 f"r = robot.move_to({fmt([*grasp[:2], grasp_z])}, q, speed=0.15)\n"
                 "print(r['success'])\nrobot.move_to(gripper='close')",
                 f"r = robot.move_to({fmt([*grasp[:2], grasp_z + 0.15])}, q, speed=0.2, mode='manipulation')\n"
                 "print(r['success'])",
                 LOOK]
        if snap.destination and snap.goal_position_m is not None:
            dest = np.asarray(snap.goal_position_m) - base
            if bad_place:
                angle = rng.uniform(0, 2 * math.pi)
                dest[:2] += rng.uniform(0.10, 0.14) * np.array([math.cos(angle), math.sin(angle)])
            top = dest[2] + 0.006 + 0.025 + 0.01
            steps += [f"r = robot.move_to({fmt([*dest[:2], top + 0.12])}, q, speed=0.2, mode='manipulation')\n"
                      "print(r['success'])",
                      f"r = robot.move_to({fmt([*dest[:2], top])}, q, speed=0.15, mode='manipulation')\n"
                      "print(r['success'])\nrobot.move_to(gripper='open')",
                      f"r = robot.move_to({fmt([*dest[:2], top + 0.12])}, q, speed=0.2)\nprint(r['success'])",
                      LOOK]
        return self._with_looks(steps, rng)

    def _with_looks(self, steps: list[str], rng: np.random.Generator) -> list[str]:
        """Insert 0-2 extra perception-only requests after each step (decouples request index from progress)."""
        out: list[str] = []
        for step in steps:
            out.append(step)
            out.extend([LOOK] * int(rng.integers(0, self.max_extra_looks + 1)))
        return out

    def act(self, request: PolicyRequest) -> PolicyReply:
        snap = request.host_context
        if request.episode_id not in self.plans:
            if snap is None or not getattr(snap, "target_object", ""):
                return PolicyReply(content="No target to act on.", finish_reason="stop")
            self.plans[request.episode_id] = self._plan(request.episode_id, snap)
        plan = self.plans[request.episode_id]
        i = request.request_index - 1
        if i >= len(plan):
            return PolicyReply(content="Done.", reasoning="The plan is complete.", finish_reason="stop")
        return PolicyReply(reasoning=f"Step {i + 1} of {len(plan)}.",
                           tool_calls=[ToolCall(new_call_id(), plan[i])], finish_reason="tool_calls")


def make_scripted_tabletop(**options: Any) -> ScriptedTabletopPolicy:
    """Factory for ``PolicySpec("captain_training.rl.scripted_tabletop:make_scripted_tabletop", {...})``."""
    return ScriptedTabletopPolicy(**options)
