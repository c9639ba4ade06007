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
from captain_backends.core.errors import BackendError, DriverFault, DriverStateError, UnknownDriverError
from captain_backends.core.registry import available_drivers, driver_class, make_driver
from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot

__all__ = [
    "HEAD_CAMERA", "WRIST_CAMERA", "AdvanceReport", "CameraFrame", "ForceGuard", "JointCommand",
    "LifecycleState", "RobotDescription", "RobotDriver", "RobotState", "SimulatedDriver", "TaskInfo",
    "BackendError", "DriverFault", "DriverStateError", "UnknownDriverError",
    "available_drivers", "driver_class", "make_driver", "GoalPredicate", "ObjectPose", "SimSnapshot",
]
