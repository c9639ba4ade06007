"""The motion primitives of the policy API: ``move_to``, ``hold``, ``recover``, ``release``
and the read-only ``check_motion`` and ``preview_motion``.

``MotionPrimitives`` works over any ``RobotDriver``. Register it (and its state calls)
with a ``RobotAPI``::

    prims = MotionPrimitives(driver, MotionConfig())
    prims.register(api)        # move_to, hold, recover, release, check_motion, preview_motion,
                               # get_robot_state, gripper_state, robot_geometry,
                               # read_motion_trajectory, transform_pose

Frames and units: positions in the robot base frame (z up), metres; quaternions
``[w, x, y, z]`` of the TCP frame (see ``kinematics``: z along the fingers, x the
jaw-closing axis; ``[0, 2**-0.5, 2**-0.5, 0]`` is a top-down grasp); speeds in m/s and
rad/s; forces in N.

Every primitive returns a ``CallOutcome`` (the result dict and its receipt) and never
raises. Physical calls are serialised by a lock and can be cancelled from another
thread (``request_cancel`` or ``cancel_scope``): the arm is then held and the call ends
with ``stopped_reason="cancelled"``.

The primitives live one family a module: ``move_to`` (a sweep or a jaw command),
``hold``, ``recover``, ``release``, and the read-only ``planning`` calls; they share
``base`` (driver, models, lock, cancellation, force guard), ``execution`` (plan, execute
and report one straight sweep) and ``request`` (``move_to``'s argument parsing).
"""

from __future__ import annotations

from captain_harness.core.motion.base import STOP_CATEGORY, MotionBase, receipt
from captain_harness.core.motion.hold import HoldCall
from captain_harness.core.motion.planning import PREVIEW_KINDS, PlanningCalls
from captain_harness.core.motion.recover import RecoverCall
from captain_harness.core.motion.release import ReleaseCall
from captain_harness.core.motion.request import GRIPPER_COMMANDS, MODES, MoveRequest

__all__ = [
    "GRIPPER_COMMANDS",
    "MODES",
    "PREVIEW_KINDS",
    "STOP_CATEGORY",
    "MotionBase",
    "MotionPrimitives",
    "MoveRequest",
    "receipt",
]


class MotionPrimitives(PlanningCalls, ReleaseCall, RecoverCall, HoldCall):
    """Motion and planning primitives over one driver (see the module docstring).

    Args:
        driver: a configured driver (ACTIVE for physical calls).
        config: thresholds, speeds and limits (``MotionConfig`` defaults when None).
    """
