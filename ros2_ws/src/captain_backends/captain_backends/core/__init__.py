"""ROS-free core of the backends: the driver interface, registry and drivers."""

from captain_backends.core.driver import (
    HEAD_CAMERA,
    WRIST_CAMERA,
    AdvanceReport,
    CameraFrame,
    ForceGuard,
    JointCommand,
    LifecycleState,
    RobotDescription,
    RobotDriver,
    RobotState,
    SimulatedDriver,
    TaskInfo,
)
from captain_backends.core.errors import (
    BackendError,
    CommandError,
    DriverFault,
    DriverStateError,
    UnknownDriverError,
)
from captain_backends.core.registry import available_drivers, driver_class, make_driver
from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot

__all__ = [
    "HEAD_CAMERA",
    "WRIST_CAMERA",
    "AdvanceReport",
    "BackendError",
    "CameraFrame",
    "CommandError",
    "DriverFault",
    "DriverStateError",
    "ForceGuard",
    "GoalPredicate",
    "JointCommand",
    "LifecycleState",
    "ObjectPose",
    "RobotDescription",
    "RobotDriver",
    "RobotState",
    "SimSnapshot",
    "SimulatedDriver",
    "TaskInfo",
    "UnknownDriverError",
    "available_drivers",
    "driver_class",
    "make_driver",
]
