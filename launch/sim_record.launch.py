"""The simulated stack with a recording: ``captain_bringup``'s sim.launch.py plus the recorder
node writing every standard topic into a rosbag2 MCAP bag in simulated time (the same as
``captain bringup sim --record PATH`` where ``ros2 launch`` is not installed).

    ros2 launch launch/sim_record.launch.py bag:=runs/sim_bag namespace:=robot1
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
    """Launch arguments: ``bag`` (the bag folder, must not exist) and ``namespace``."""
    sim = str(Path(get_package_share_directory("captain_bringup")) / "launch" / "sim.launch.py")
    namespace = LaunchConfiguration("namespace")
    return LaunchDescription([
        DeclareLaunchArgument("bag", default_value="runs/sim_bag", description="rosbag2 folder to write"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(sim), launch_arguments={"namespace": namespace}.items()),
        Node(package="captain_harness", executable="recorder_node", name="recorder", namespace=namespace,
             parameters=[{"path": LaunchConfiguration("bag"), "time_source": "clock"}], output="screen"),
    ])
