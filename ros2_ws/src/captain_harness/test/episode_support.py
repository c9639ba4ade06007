"""Test support for the episode layer: a small tabletop world with a few primitives
registered in a real ``RobotAPI``, the scripted chat-completions server, and helpers.

The world is deliberately simple (a bowl and a plate on a table, an ideal gripper),
because the tests exercise the session, loop, gate and records, not the robot. Its
success predicate is the geometric relation itself, so the host outcome follows from
what the scripted policy's code does.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from captain_backends.core.driver import TaskInfo
from captain_harness.core.api import RobotAPI, primitive
from captain_harness.core.episode.backend import Backend, BackendRequest
from captain_harness.core.episode.policy.scripted_server import ScriptedChatServer, completion  # noqa: F401
from captain_harness.core.episode.records import write_workspace_file
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok

TABLE_Z_M = 0.0
GRASP_RADIUS_M = 0.03


class ToyWorld:
    """A bowl and a plate on a table; ``move_to`` moves the tool centre point, closing the
    jaw near the bowl grasps it, opening drops it where the hand is."""

    def __init__(self, workspace: Path, bowl_xy: tuple[float, float] = (0.10, 0.20),
                 plate_xy: tuple[float, float] = (0.30, -0.10), image_px: int = 96) -> None:
        self.workspace = Path(workspace)
        self.objects = {
            "bowl": np.array([*bowl_xy, TABLE_Z_M + 0.03]),
            "plate": np.array([*plate_xy, TABLE_Z_M]),
        }
        self.ee = np.array([0.0, 0.0, 0.4])
        self.gripper_open = 1.0
        self.held: str | None = None
        #: the peak force (N) the next arm motions report (0: they touch nothing)
        self.contact_force_n = 0.0
        self.n_obs = 0
        self.detections: dict[str, str] = {}
        self.image_px = image_px

    # ---------------------------------------------------------------- primitives
    @primitive(group="perception")
    def observe(self) -> CallOutcome:
        """Head and wrist RGB at the world's image size; saves obs_<k>_head.png / obs_<k>_wrist.png."""
        k = self.n_obs
        self.n_obs += 1
        names = {}
        for camera, label in (("agentview", "head"), ("robot0_eye_in_hand", "wrist")):
            img = np.full((self.image_px, self.image_px, 3), 40 + 20 * k % 200, dtype=np.uint8)
            for name, pos in self.objects.items():
                u = int(np.clip((pos[0] + 0.5) * self.image_px, 0, self.image_px - 4))
                v = int(np.clip((pos[1] + 0.5) * self.image_px, 0, self.image_px - 4))
                img[v : v + 4, u : u + 4] = (220, 30, 30) if name == "bowl" else (30, 30, 220)
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, format="PNG")
            name = f"obs_{k:03d}_{label}.png"
            write_workspace_file(self.workspace, name, buf.getvalue())
            names[camera] = name
        value = {
            "observation_handle": f"obs_{k}",
            "images": names,
            "robot_state": {"end_effector_position_m": self.ee.tolist()},
        }
        result = ok(value)
        return CallOutcome(result, format_receipt("observe", result, [("observation_handle", f"obs_{k}")]))

    @primitive(group="perception")
    def mark_point(
        self,
        observation_handle: str,
        camera: str,
        u: float,
        v: float,
        label: str = "",
        granularity: str = "part",
    ) -> CallOutcome:
        """Back-project pixel (u, v); the label names the object ("bowl" or "plate")."""
        target = "bowl" if "bowl" in str(label) else "plate" if "plate" in str(label) else None
        if target is None:
            result = fail(FailureCategory.NOT_FOUND, f"nothing named {label!r}; label 'bowl' or 'plate'")
            return CallOutcome(result, format_receipt("mark_point", result))
        det = f"det_{len(self.detections)}"
        self.detections[det] = target
        result = ok({"detection_id": det, "position_m": self.objects[target].tolist()})
        return CallOutcome(
            result,
            format_receipt(
                "mark_point", result, [("detection_id", det), ("position_m", self.objects[target])]
            ),
        )

    @primitive(group="measurement")
    def measure_object_geometry(
        self, object_id: str, destination_id: str | None = None, shape: str = "auto", cameras: str = "primary"
    ) -> CallOutcome:
        """Centres, radius and the object-to-destination offset of two detections."""
        if object_id not in self.detections or (
            destination_id is not None and destination_id not in self.detections
        ):
            result = fail(FailureCategory.UNKNOWN_ID, f"unknown detection; known: {sorted(self.detections)}")
            return CallOutcome(result, format_receipt("measure_object_geometry", result))

        def geom(name: str) -> dict[str, Any]:
            p = self.objects[name]
            return {
                "center_m": p.tolist(),
                "center_xy_m": p[:2].tolist(),
                "top_z_m": float(p[2] + 0.02),
                "lowest_point_z_m": float(p[2] - 0.02),
                "footprint": {"radius_m": 0.04},
            }

        obj = self.detections[object_id]
        value: dict[str, Any] = {"object": geom(obj), "resting_height_consistent": self.held != obj}
        fields: list[tuple[str, Any]] = [("object", obj)]
        if destination_id is not None:
            dst = self.detections[destination_id]
            off = self.objects[dst][:2] - self.objects[obj][:2]
            value.update(
                destination=geom(dst),
                object_to_destination_xy_offset_m=off.tolist(),
                xy_distance_m=float(np.hypot(*off)),
                resting_height_consistent=self.held != obj,
            )
            fields += [("xy_distance_m", float(np.hypot(*off)))]
        result = ok(value)
        return CallOutcome(result, format_receipt("measure_object_geometry", result, fields))

    @primitive(physical=True, group="motion")
    def move_to(
        self,
        position: Any = None,
        quaternion: Any = None,
        speed: float | None = None,
        duration: float | None = None,
        angular: float | None = None,
        mode: str = "guarded",
        gripper: str | None = None,
    ) -> CallOutcome:
        """Move the tool centre point to ``position`` (m, base frame) or command the jaw ("open"/"close")."""
        if gripper is not None:
            if gripper not in ("open", "close"):
                result = fail(FailureCategory.INVALID_ARGUMENT, "gripper must be 'open' or 'close'")
                return CallOutcome(result, format_receipt("move_to", result))
            before = self.gripper_open
            self.gripper_open = 1.0 if gripper == "open" else 0.04
            if gripper == "close":
                bowl = self.objects["bowl"]
                if (
                    np.linalg.norm(bowl[:2] - self.ee[:2]) < GRASP_RADIUS_M
                    and abs(bowl[2] - self.ee[2]) < 0.05
                ):
                    self.held = "bowl"
            elif self.held is not None:
                self.objects[self.held] = np.array([*self.ee[:2], TABLE_Z_M + 0.03])
                self.held = None
            result = ok({"command": gripper, "gripper_open_fraction": self.gripper_open, "held": self.held is not None},
                        executed=True)
            return CallOutcome(
                result,
                format_receipt("move_to", result, [("gripper_open_fraction", (before, self.gripper_open))]),
            )
        try:
            target = np.asarray(position, dtype=float).reshape(3)
        except (TypeError, ValueError):
            result = fail(FailureCategory.INVALID_ARGUMENT, "position must be 3 numbers [x, y, z] in metres")
            return CallOutcome(result, format_receipt("move_to", result))
        if not np.all(np.isfinite(target)):
            result = fail(FailureCategory.INVALID_ARGUMENT, "position has NaN or inf; give finite metres")
            return CallOutcome(result, format_receipt("move_to", result))
        dist = float(np.linalg.norm(target - self.ee))
        self.ee = target
        if self.held is not None:
            self.objects[self.held] = target.copy()
        force = self.contact_force_n
        value = {"stopped_reason": "target_reached", "executed_distance_m": dist, "max_observed_force_n": force,
                 "held": self.held is not None}
        result = ok(value, executed=True)
        return CallOutcome(
            result,
            format_receipt(
                "move_to",
                result,
                [
                    ("stopped_reason", "target_reached"),
                    ("executed_distance_m", dist),
                    ("max_observed_force_n", force),
                ],
            ),
        )

    @primitive(physical=True, group="motion")
    def hold(self, duration_s: float = 1.0) -> CallOutcome:
        """Hold still for ``duration_s`` seconds."""
        result = ok({"duration_s": duration_s}, executed=True)
        return CallOutcome(result, format_receipt("hold", result))

    # ---------------------------------------------------------------- host side
    def success(self) -> bool:
        """On(bowl, plate): bowl within 2 cm of the plate centre and not held."""
        d = float(np.hypot(*(self.objects["bowl"][:2] - self.objects["plate"][:2])))
        return self.held is None and d <= 0.02


def toy_backend(request: BackendRequest) -> Backend:
    """A backend factory (importable as ``episode_support:toy_backend``)."""
    world = ToyWorld(request.workspace)
    api = RobotAPI()
    api.register_object(world)
    task = TaskInfo(
        task_id=request.task,
        instruction="put the black bowl on the plate",
        suite="toy",
        init_state=request.init_state,
        goals=("On(akita_black_bowl_1, plate_1)",),
        objects=("akita_black_bowl_1", "plate_1"),
    )
    return Backend(
        api=api,
        task=task,
        check_success=world.success,
        host_context=lambda: {"bowl_m": world.objects["bowl"].tolist()},
    )


#: Code of a successful episode of the toy world, one request per item.
SOLVE = [
    "obs = robot.observe(); image(obs['value']['images'])\n"
    "h = obs['value']['observation_handle']\n"
    "b = robot.mark_point(h, 'agentview', 0.6, 0.7, label='black bowl')\n"
    "p = robot.mark_point(h, 'agentview', 0.8, 0.4, label='plate')\n"
    "g = robot.measure_object_geometry(b['value']['detection_id'], p['value']['detection_id'])\n"
    "print(g['value']['xy_distance_m'])",
    "q = [0, 2**-0.5, 2**-0.5, 0]\n"
    "c = np.array(g['value']['object']['center_m'])\n"
    "robot.move_to(c, q); robot.move_to(gripper='close')\n"
    "robot.move_to(np.array(g['value']['destination']['center_m']) + [0, 0, 0.03], q, mode='manipulation')\n"
    "robot.move_to(gripper='open')",
    "obs = robot.observe()\nh = obs['value']['observation_handle']\n"
    "b = robot.mark_point(h, 'agentview', 0.8, 0.4, label='bowl')\n"
    "p = robot.mark_point(h, 'agentview', 0.8, 0.4, label='plate')\n"
    "g = robot.measure_object_geometry(b['value']['detection_id'], p['value']['detection_id'])\n"
    "g['value']['xy_distance_m']",
    "robot.finish('bowl on plate')",
]


# ------------------------------------------------------------ scripted endpoint
FakeChatServer = ScriptedChatServer


def tool_texts(body: dict[str, Any]) -> list[str]:
    """The text of every tool message of a request body."""
    out = []
    for m in body["messages"]:
        if m.get("role") == "tool":
            content = m["content"]
            out.append(
                content
                if isinstance(content, str)
                else "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
            )
    return out
