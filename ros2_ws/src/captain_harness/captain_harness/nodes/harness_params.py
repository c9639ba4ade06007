"""Parameters of the harness node: name, type, default, unit, range and meaning, in one place.

ROS-free: the node declares these with ROS parameter descriptors (``ros_params``), the
bringup tests validate the YAML files against them, and ``describe`` documents them.
The ``motion.*`` parameters are generated from ``MotionConfig`` (the motion core's own
schema), so their units and ranges are declared once, there.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from captain_backends.core.params import ParamSpec
from captain_harness.core.motion_config import MotionConfig

#: The two cameras of the policy API, published by the sim stack.
CAMERAS = ("agentview", "robot0_eye_in_hand")

MOTION_PREFIX = "motion."

BASE: tuple[ParamSpec, ...] = (
    ParamSpec("driver", str, "mock",
              "registered driver name (entry-point group captain.drivers), e.g. mock, tabletop, libero, xr1"),
    ParamSpec("task", str, "",
              "the driver's task: a tabletop task such as cube_on_plate, a LIBERO task such as "
              "libero_spatial/0; empty: the driver's default (ignored by real robots)"),
    ParamSpec("init_state", int, -1, "official initial state index; -1: the driver's default",
              min_value=-1, max_value=10_000),
    ParamSpec("seed", int, -1, "layout seed; -1: the driver's default", min_value=-1, max_value=2**31 - 1),
    ParamSpec("image_size_px", int, 512, "square camera image size of simulated drivers", unit="px",
              min_value=64, max_value=2048),
    ParamSpec("sim_speed", float, 0.0,
              "simulated drivers run at most this many times real time (1.0: real time, for watching "
              "in RViz or Foxglove; 0: as fast as they can)", unit="x", min_value=0.0, max_value=1000.0),
    ParamSpec("driver_config_path", str, "",
              "configuration file of a real-robot driver (xr1: its YAML; empty: the packaged one)"),
    ParamSpec("driver_options_json", str, "{}",
              "further driver constructor options as a JSON object, e.g. {\"settle_s\": 0.2}"),
    ParamSpec("driver_retry_period_s", float, 2.0,
              "wait between attempts to configure and activate the driver (e.g. while a real robot's "
              "topics are not up yet)", unit="s", min_value=0.1, max_value=60.0),
    ParamSpec("workspace_dir", str, "",
              "folder where perception writes frames outside episodes; empty: a temporary folder, removed at "
              "shutdown"),
    ParamSpec("joint_states_rate_hz", float, 50.0,
              "rate of sensor_msgs/JointState on joint_states (arm joints, rad, and gripper_opening, m); "
              "0: off (a robot or twin that publishes its own)", unit="Hz", min_value=0.0, max_value=1000.0),
    ParamSpec("wrench_rate_hz", float, 50.0,
              "rate of geometry_msgs/WrenchStamped on wrench (contact wrench on the tool, base frame); 0: off",
              unit="Hz", min_value=0.0, max_value=1000.0),
    ParamSpec("tf_rate_hz", float, 50.0,
              "rate of /tf (links moved by the arm joints, from the driver's kinematic model) and, for simulated "
              "drivers, /clock (simulated time); robot_description and /tf_static are latched; 0: only those",
              unit="Hz", min_value=0.0, max_value=1000.0),
    ParamSpec("camera_rate_hz", float, 2.0,
              "rate of colour, depth and camera_info per camera (rendered only while someone subscribes); "
              "0: off", unit="Hz", min_value=0.0, max_value=60.0),
    ParamSpec("cameras", list, list(CAMERAS), "cameras to publish (names of the policy API)"),
    ParamSpec("camera_qos", str, "sensor_data",
              "QoS of the camera topics: sensor_data (best effort; in RViz set the display's Reliability Policy "
              "to Best Effort) or reliable (RViz's default)", choices=("sensor_data", "reliable")),
    ParamSpec("depth_encoding", str, "32FC1", "depth image encoding: 32FC1 (m) or 16UC1 (mm)",
              choices=("32FC1", "16UC1")),
    ParamSpec("feedback_rate_hz", float, 20.0,
              "most feedback messages of a motion goal per second of wall time (besides one per "
              "motion.state_sample_period_s of driver time; the first and the last always go out): a "
              "simulation running faster than real time would otherwise flood every action client; 0: no cap",
              unit="Hz", min_value=0.0, max_value=1000.0),
    ParamSpec("diagnostics_rate_hz", float, 1.0, "rate of diagnostic_msgs/DiagnosticArray on diagnostics",
              unit="Hz", min_value=0.1, max_value=50.0),
)


def _motion_specs() -> tuple[ParamSpec, ...]:
    specs = []
    for f in fields(MotionConfig):
        lo, hi = f.metadata["range"]
        default: Any = f.default
        kind: type = type(default)
        if isinstance(default, tuple):
            kind, default = list, [float(x) for x in default]
        specs.append(ParamSpec(MOTION_PREFIX + f.name, kind, default, f.metadata["doc"], unit=f.metadata["unit"],
                               min_value=lo if kind in (int, float) else None,
                               max_value=hi if kind in (int, float) else None))
    return tuple(specs)


#: Every parameter of the harness node.
SCHEMA: tuple[ParamSpec, ...] = BASE + _motion_specs()


def motion_config(values: dict[str, Any]) -> MotionConfig:
    """The ``MotionConfig`` of validated parameter values (``motion.*`` entries)."""
    return MotionConfig.from_dict({k[len(MOTION_PREFIX):]: v for k, v in values.items()
                                   if k.startswith(MOTION_PREFIX)})
