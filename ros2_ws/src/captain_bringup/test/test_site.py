"""xr1_real's launch arguments for what differs between sites: controller names, topics and
camera topics become XR1 configuration overrides the driver's own loader accepts, camera
extrinsics stay as configured, and the overlay is a harness parameter file the stack
description validates. The launch files are checked by their syntax tree (``launch`` is not
installed here)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from captain_backends.core.xr1.config import load_config
from captain_bringup.core.site import camera_topics_arg, merge_overlays, overlay_yaml, xr1_overrides
from captain_bringup.core.stack import load_params

ROOT = Path(__file__).resolve().parents[4]
PACKAGE_LAUNCH = Path(__file__).resolve().parents[1] / "launch"


def test_site_arguments_become_driver_configuration() -> None:
    overrides = xr1_overrides(arm_controller="arm_pos", trajectory_controller="arm_traj", gripper_controller="hand",
                              joint_states_topic="robot/joint_states", wrench_topic="ft/wrench",
                              camera_topics=camera_topics_arg("agentview=head_cam, robot0_eye_in_hand=wrist_cam"))
    packaged = load_config(None)
    config = load_config(None, **overrides)
    assert config.command.forward_position_topic == "arm_pos/commands"
    assert config.command.joint_trajectory_topic == "arm_traj/joint_trajectory"
    assert config.gripper.command_topic == "hand/commands"
    assert config.joint_states_topic == "robot/joint_states" and config.wrench.topic == "ft/wrench"
    head = config.camera("agentview")
    assert (head.image_topic, head.depth_topic, head.camera_info_topic) == (
        "head_cam/color/image_raw", "head_cam/aligned_depth_to_color/image_raw", "head_cam/color/camera_info")
    assert list(head.xyz_m) == list(packaged.camera("agentview").xyz_m)
    assert config.camera("robot0_eye_in_hand").parent_frame == packaged.camera("robot0_eye_in_hand").parent_frame


def test_unknown_cameras_and_malformed_pairs_are_refused() -> None:
    with pytest.raises(ValueError, match="cameras: "):
        xr1_overrides(camera_topics={"front": "front_cam"})
    with pytest.raises(ValueError, match="camera=topic_prefix"):
        camera_topics_arg("agentview")
    with pytest.raises(Exception, match="absolute"):  # the driver's own check, before launch
        xr1_overrides(joint_states_topic="/joint_states")
    assert xr1_overrides() == {}


def test_overlay_is_a_valid_harness_parameter_file(tmp_path: Path) -> None:
    overrides = xr1_overrides(arm_controller="arm_pos")
    site = overlay_yaml(overrides, "/etc/captain/xr1.yaml")
    extra = "/**/harness:\n  ros__parameters:\n    driver_retry_period_s: 10.0\n"
    path = tmp_path / "site.yaml"
    path.write_text(merge_overlays(site, extra))
    params = load_params("xr1_real", extra_files=[path])["harness"]
    assert json.loads(params["driver_options_json"]) == overrides
    assert params["driver_config_path"] == "/etc/captain/xr1.yaml" and params["driver_retry_period_s"] == 10.0
    assert list(yaml.safe_load(path.read_text())) == ["/**/harness"]


def _declared(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {n.args[0].value for n in ast.walk(tree)
             if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DeclareLaunchArgument"
             and n.args and isinstance(n.args[0], ast.Constant)}
    for node in ast.walk(tree):  # xr1_real declares its arguments from the ARGUMENTS table
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ARGUMENTS":
            names |= {k.value for k in node.value.keys}
    return names


def test_launch_files_declare_their_arguments() -> None:
    assert {"namespace", "config_path", "arm_controller", "trajectory_controller", "gripper_controller",
            "joint_states_topic", "wrench_topic", "camera_topics", "params_file"} <= _declared(
        PACKAGE_LAUNCH / "xr1_real.launch.py")
    assert {"stack", "namespace", "params_file"} <= _declared(PACKAGE_LAUNCH / "core.launch.py")
    assert {"bag", "namespace"} <= _declared(ROOT / "launch" / "sim_record.launch.py")
    assert {"namespace", "rviz_config"} <= _declared(ROOT / "launch" / "twin_rviz.launch.py")
    rviz = yaml.safe_load((ROOT / "launch" / "captain.rviz").read_text())
    classes = {d["Class"] for d in rviz["Visualization Manager"]["Displays"]}
    assert {"rviz_default_plugins/RobotModel", "rviz_default_plugins/TF"} <= classes
