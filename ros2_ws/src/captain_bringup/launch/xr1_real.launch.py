"""Bring up the CaPtain stack on a real XR1: the core launch file with stack:=xr1_real, plus
the launch arguments that differ between sites.

    ros2 launch captain_bringup xr1_real.launch.py namespace:=xr1 \
        arm_controller:=arm_position_controller gripper_controller:=hand_controller \
        joint_states_topic:=joint_states wrench_topic:=ft_sensor/wrench \
        camera_topics:=agentview=head_camera,robot0_eye_in_hand=wrist_camera \
        config_path:=/etc/captain/xr1.yaml params_file:=/etc/captain/site.yaml

The harness keeps waiting for the arm: it retries configuring the driver every
``driver_retry_period_s`` until the robot's topics are up (it never gives up), and the
stack description's ``respawn`` restarts a node that dies. Controller and topic
arguments become XR1 configuration overrides (``captain_bringup.core.site``), written as a
harness parameter overlay that the site's ``params_file`` may still override.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

from captain_bringup.core.site import camera_topics_arg, merge_overlays, overlay_yaml, xr1_overrides

ARGUMENTS = {
    "namespace": ("", "namespace of every node (the robot's topics are relative to it)"),
    "config_path": ("", "the site's XR1 configuration YAML (empty: the packaged stand-in)"),
    "arm_controller": ("", "forward position controller name (topic <name>/commands)"),
    "trajectory_controller": ("", "joint trajectory controller name (topic <name>/joint_trajectory)"),
    "gripper_controller": ("", "gripper controller name (topic <name>/commands)"),
    "joint_states_topic": ("", "joint_state_broadcaster's topic (relative to namespace)"),
    "wrench_topic": ("", "force/torque broadcaster's topic"),
    "camera_topics": ("", "camera=topic_prefix pairs, comma separated (e.g. agentview=head_camera)"),
    "params_file": ("", "further parameter overlay keyed by node name (applied last)"),
}


def _include(context, *args, **kwargs):
    value = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    overrides = xr1_overrides(
        config_path=value["config_path"], arm_controller=value["arm_controller"],
        trajectory_controller=value["trajectory_controller"], gripper_controller=value["gripper_controller"],
        joint_states_topic=value["joint_states_topic"], wrench_topic=value["wrench_topic"],
        camera_topics=camera_topics_arg(value["camera_topics"]))
    site = Path(tempfile.mkdtemp(prefix="captain_xr1_site_")) / "site.yaml"
    site.write_text(overlay_yaml(overrides, value["config_path"]))
    if value["params_file"]:  # one overlay for core.launch.py: the site's file merged over ours
        site.write_text(merge_overlays(site.read_text(), Path(value["params_file"]).read_text()))
    core = str(Path(__file__).with_name("core.launch.py"))
    return [IncludeLaunchDescription(PythonLaunchDescriptionSource(core), launch_arguments={
        "stack": "xr1_real", "namespace": value["namespace"], "params_file": str(site)}.items())]


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: see ``ARGUMENTS`` (all optional)."""
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=doc)
          for name, (default, doc) in ARGUMENTS.items()),
        OpaqueFunction(function=_include),
    ])
