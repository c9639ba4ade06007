"""Core bringup of the CaPtain stack (standard launch_ros API).

Which nodes run comes from ``captain_bringup.core.stack`` — the same description the
in-process runner (``captain bringup``) uses — and every node gets the shared parameter
file ``config/captain.yaml`` plus the stack's overlay ``config/<stack>.yaml``.

    ros2 launch captain_bringup core.launch.py stack:=sim namespace:=robot1
"""

from __future__ import annotations

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from captain_bringup.core.stack import STACKS, param_files, stack_nodes
from captain_perception.nodes.dds_profile import profile_env


def _nodes(context, *args, **kwargs):
    stack = LaunchConfiguration("stack").perform(context)
    namespace = LaunchConfiguration("namespace").perform(context)
    files = [str(p) for p in param_files(stack)]
    overlay = context.launch_configurations.get("params_file", "")
    if overlay:  # a site's overlay, keyed by node name; it wins over the stack's files
        files.append(overlay)
    env = profile_env()  # the stack's Fast DDS profile (large camera frames), unless one is chosen
    return [
        Node(package=spec.package, executable=spec.executable, name=spec.name, namespace=namespace,
             parameters=files, output="screen", emulate_tty=True, additional_env=env or None,
             respawn=spec.respawn, respawn_delay=spec.respawn_delay_s)
        for spec in stack_nodes(stack)
    ]


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: ``stack`` (sim | xr1_twin | xr1_real), ``namespace`` and
    ``params_file`` (an overlay applied after the stack's files)."""
    return LaunchDescription([
        DeclareLaunchArgument("stack", default_value="sim", choices=list(STACKS),
                              description="which bringup: " + ", ".join(STACKS)),
        DeclareLaunchArgument("namespace", default_value="", description="namespace for every node"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="further parameter YAML overlay keyed by node name (last wins)"),
        OpaqueFunction(function=_nodes),
    ])
