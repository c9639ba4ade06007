"""The XR1 twin stack watched in RViz: ``captain_bringup``'s xr1_twin.launch.py plus rviz2
with ``launch/captain.rviz`` (robot model from ``robot_description``, TF, the head camera).

    ros2 launch launch/twin_rviz.launch.py

The camera displays subscribe best effort, matching the default ``camera_qos: sensor_data``;
with ``camera_qos: reliable`` either setting works.
"""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: ``namespace`` and ``rviz_config``."""
    twin = str(Path(get_package_share_directory("captain_bringup")) / "launch" / "xr1_twin.launch.py")
    namespace = LaunchConfiguration("namespace")
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
        DeclareLaunchArgument("rviz_config", default_value=str(Path(__file__).with_name("captain.rviz")),
                              description="RViz configuration"),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(twin),
                                 launch_arguments={"namespace": namespace}.items()),
        Node(package="rviz2", executable="rviz2", name="rviz2", namespace=namespace,
             arguments=["-d", LaunchConfiguration("rviz_config")], output="screen"),
    ])
