"""Bring up the CaPtain stack 'sim': the core launch file with stack:=sim."""

from __future__ import annotations

from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration


def generate_launch_description() -> LaunchDescription:
    """Includes core.launch.py with the 'sim' node set and parameter overlay."""
    core = str(Path(__file__).with_name("core.launch.py"))
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value=""),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(core), launch_arguments={
            "stack": "sim", "namespace": LaunchConfiguration("namespace")}.items()),
    ])
