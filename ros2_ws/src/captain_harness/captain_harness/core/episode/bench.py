"""Benchmark of the episode layer: harness time per request (``captain bench episode``).

Runs one episode of ``requests`` requests with a replay policy against a light backend
whose calls cost almost nothing (an ``observe`` that writes two 512x512 PNG frames, a
measurement and a physical ``nudge``), so that what is measured is the harness itself:
history rendering, the session round trips, cell formatting, image handling and the
records. Harness time per request excludes the policy call, the robot calls on the host
and the cell code's own compute (see ``EpisodeOutcome``).
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from captain_harness.core.api import RobotAPI, primitive
from captain_harness.core.budget import BudgetLimits
from captain_harness.core.episode.backend import Backend, BackendRequest
from captain_harness.core.episode.records import write_workspace_file
from captain_harness.core.results import CallOutcome, format_receipt, ok


class _LightScene:
    """Cheap primitives with realistic result sizes."""

    def __init__(self, workspace: Path, frame_px: int) -> None:
        self.workspace = workspace
        self.n = 0
        self.x_m = 0.0
        from PIL import Image

        # Smooth shading plus sensor-like noise: PNG sizes like real 512x512 camera frames (~0.5 MB).
        rng = np.random.default_rng(0)
        y, x = np.mgrid[0:frame_px, 0:frame_px]
        img = np.stack([x % 256, y % 256, (x + y) % 256], -1) * 0.5 + rng.normal(
            0.0, 6.0, (frame_px, frame_px, 3)
        )
        buf = io.BytesIO()
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, format="PNG")
        self.png = buf.getvalue()

    @primitive(group="perception")
    def observe(self) -> CallOutcome:
        """Head and wrist frames (saved as obs_<k>_head.png / obs_<k>_wrist.png)."""
        k = self.n
        self.n += 1
        names = {}
        for camera, label in (("agentview", "head"), ("robot0_eye_in_hand", "wrist")):
            name = f"obs_{k:03d}_{label}.png"
            write_workspace_file(self.workspace, name, self.png)
            names[camera] = name
        result = ok(
            {
                "observation_handle": f"obs_{k}",
                "images": names,
                "robot_state": {"end_effector_position_m": [self.x_m, 0.0, 0.3]},
                "intrinsics": {"fx": 512.0, "fy": 512.0, "cx": 256.0, "cy": 256.0},
            }
        )
        return CallOutcome(result, format_receipt("observe", result, [("observation_handle", f"obs_{k}")]))

    @primitive(group="measurement")
    def measure(self, object_id: str = "a", destination_id: str = "b") -> CallOutcome:
        """A measurement-sized result."""
        value = {
            "object": {"center_m": [0.1, 0.2, 0.05], "footprint": {"radius_m": 0.04}},
            "destination": {"center_m": [0.3, -0.1, 0.0]},
            "xy_distance_m": 0.36,
            "object_to_destination_xy_offset_m": [0.2, -0.3],
            "resting_height_consistent": True,
        }
        result = ok(value)
        return CallOutcome(result, format_receipt("measure", result, [("xy_distance_m", 0.36)]))

    @primitive(physical=True, group="motion")
    def nudge(self, dx_m: float = 0.01) -> CallOutcome:
        """Move by dx_m along x."""
        self.x_m += float(dx_m)
        result = ok({"x_m": self.x_m}, executed=True)
        return CallOutcome(
            result,
            format_receipt(
                "nudge", result, [("stopped_reason", "target_reached"), ("executed_distance_m", abs(dx_m))]
            ),
        )


_FRAME_PX = 512


def _backend(request: BackendRequest) -> Backend:
    from captain_backends.core.driver import TaskInfo

    scene = _LightScene(request.workspace, _FRAME_PX)
    api = RobotAPI()
    api.register_object(scene)
    task = TaskInfo(
        task_id=request.task,
        instruction="move the block onto the plate",
        suite="bench",
        goals=("On(block_1, plate_1)",),
    )
    return Backend(api=api, task=task, check_success=lambda: False)


def run(
    requests: int = 30, isolation: str = "auto", frame_px: int = 512, policy: str = "openai"
) -> dict[str, float]:
    """Run one benchmark episode; returns figures with units in their names.

    ``policy="openai"`` drives the episode through the chat-completions client and a scripted
    local server (request building, image encoding and reply parsing count as harness time);
    ``policy="replay"`` plays the cells directly.
    """
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.policy.replay import ReplayPolicy
    from captain_harness.core.episode.policy.scripted_server import ScriptedChatServer, completion
    from captain_harness.core.episode.runner import EpisodeConfig, run_episode
    from captain_harness.core.episode.sandbox import SandboxConfig

    global _FRAME_PX
    _FRAME_PX = int(frame_px)
    n = int(requests)
    cell = (
        "obs = robot.observe(); image(obs['value']['images'])\n"
        "for i in range(3):\n    m = robot.measure('a', 'b')\n"
        "robot.nudge(0.01)\nprint(m['value']['xy_distance_m'], obs['value']['observation_handle'])"
    )
    config = EpisodeConfig(
        limits=BudgetLimits(max_requests=n, max_physical_actions=10 * n),
        sandbox=SandboxConfig(isolation=isolation),
    )
    server = ScriptedChatServer(
        [completion(cell, reasoning="look, measure, move", prompt_tokens=None)] * n, keep_requests=False
    )
    with tempfile.TemporaryDirectory() as out, server:
        spec: Any = (
            ReplayPolicy.from_cells([cell] * n)
            if policy == "replay"
            else PolicySpec("openai", {"base_url": server.base_url, "model": "bench"})
        )
        started = time.perf_counter()
        outcome = run_episode("bench/0", policy=spec, out_dir=out, backend_factory=_backend, config=config)
        total_s = time.perf_counter() - started
        rows_mb = (Path(outcome.record_dir) / "rows.jsonl").stat().st_size / 1e6
    per = sorted(outcome.harness_s_per_request)
    return {
        "requests": float(outcome.requests),
        "harness_s_per_request_median": statistics.median(per) if per else float("nan"),
        "harness_s_per_request_p90": per[int(0.9 * (len(per) - 1))] if per else float("nan"),
        "harness_s_per_request_max": per[-1] if per else float("nan"),
        "policy_s_total": outcome.policy_s_total,
        "robot_s_total": outcome.robot_s_total,
        "episode_wall_s": total_s,
        "rows_mb": rows_mb,
        "sandbox_bwrap": 1.0 if outcome.protections.get("mechanism") == "bwrap" else 0.0,
    }
