"""What differs between sites running the real XR1, as launch arguments (``xr1_real.launch.py``)
turn it into a parameter overlay of the harness. ROS-free.

A site names its controllers and topics; the XR1 driver's configuration
(``captain_backends/config/xr1.yaml`` or ``driver_config_path``) keeps everything else
(joints, limits, camera extrinsics). ``xr1_overrides`` maps the arguments to the driver's
configuration overrides, ``overlay_yaml`` writes them as a ``/**/harness`` parameter file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from captain_backends.core.xr1.config import load_config


def xr1_overrides(*, config_path: str = "", arm_controller: str = "", trajectory_controller: str = "",
                  gripper_controller: str = "", joint_states_topic: str = "", wrench_topic: str = "",
                  camera_topics: dict[str, str] | None = None) -> dict[str, Any]:
    """The XR1 configuration overrides of a site ("" keeps the configured value).

    Args:
        config_path: the site's XR1 YAML ("" = the packaged one); camera entries are read
            from it so that a new topic prefix keeps the camera's extrinsics.
        arm_controller: forward position controller name (topic ``<name>/commands``).
        trajectory_controller: joint trajectory controller name (``<name>/joint_trajectory``).
        gripper_controller: gripper controller name (``<name>/commands``).
        joint_states_topic / wrench_topic: topic names.
        camera_topics: camera name -> topic prefix (``<prefix>/color/image_raw``,
            ``<prefix>/aligned_depth_to_color/image_raw``, ``<prefix>/color/camera_info``).

    Raises:
        ValueError: a camera that the configuration does not have (the message lists them).
    """
    out: dict[str, Any] = {}
    command: dict[str, str] = {}
    if arm_controller:
        command["forward_position_topic"] = f"{arm_controller}/commands"
    if trajectory_controller:
        command["joint_trajectory_topic"] = f"{trajectory_controller}/joint_trajectory"
    if command:
        out["command"] = command
    if gripper_controller:
        out["gripper"] = {"command_topic": f"{gripper_controller}/commands"}
    if joint_states_topic:
        out["joint_states_topic"] = joint_states_topic
    if wrench_topic:
        out["wrench"] = {"topic": wrench_topic}
    if camera_topics:
        cameras = (dict(yaml.safe_load(Path(config_path).read_text()).get("cameras") or {}) if config_path
                   else _packaged_cameras())
        unknown = sorted(set(camera_topics) - set(cameras))
        if unknown:
            raise ValueError(f"camera(s) {unknown} are not in the XR1 configuration; cameras: {sorted(cameras)}")
        out["cameras"] = {}
        for name, entry in cameras.items():
            entry = dict(entry)
            prefix = camera_topics.get(name, "").strip("/")
            if prefix:
                entry.update(image_topic=f"{prefix}/color/image_raw",
                             depth_topic=f"{prefix}/aligned_depth_to_color/image_raw",
                             camera_info_topic=f"{prefix}/color/camera_info")
            out["cameras"][name] = entry
    load_config(config_path or None, **out)  # refuse here what the driver would refuse
    return out


def _packaged_cameras() -> dict[str, Any]:
    from captain_backends.core.xr1.config import default_config_path

    return dict(yaml.safe_load(default_config_path().read_text())["cameras"])


def camera_topics_arg(text: str) -> dict[str, str]:
    """``"agentview=head_cam,robot0_eye_in_hand=wrist_cam"`` -> a dict ("" -> {})."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, prefix = item.partition("=")
        if not sep or not name or not prefix:
            raise ValueError(f"camera_topics entry {item!r} must look like camera=topic_prefix")
        out[name.strip()] = prefix.strip()
    return out


def overlay_yaml(overrides: dict[str, Any], config_path: str = "") -> str:
    """A ``/**/harness`` parameter overlay carrying ``overrides`` as ``driver_options_json``."""
    params: dict[str, Any] = {"driver_options_json": json.dumps(overrides)}
    if config_path:
        params["driver_config_path"] = config_path
    return yaml.safe_dump({"/**/harness": {"ros__parameters": params}}, sort_keys=False)


def merge_overlays(base: str, extra: str) -> str:
    """Two parameter files (YAML text) as one, ``extra``'s values winning node by node."""
    merged: dict[str, Any] = yaml.safe_load(base) or {}
    for node, body in (yaml.safe_load(extra) or {}).items():
        params = merged.setdefault(node, {}).setdefault("ros__parameters", {})
        params.update((body or {}).get("ros__parameters") or {})
    return yaml.safe_dump(merged, sort_keys=False)
