"""The policy-facing perception and measurement calls (``@primitive`` methods).

``Perception`` is registered with ``RobotAPI.register_object``. Every method returns a
``CallOutcome`` (result dict with the fixed keys + one receipt line) and never raises:
argument errors, unknown or stale handles and ids, missing backends and internal errors
all become failed results with a precise ``failure_category`` and a message that says
how to fix the call.

Every call goes through the one primitive boundary, ``@primitive``
(``captain_harness.core.boundary``): argument binding, never-raise, receipts.
The calls live by concept in ``observing`` (``observe``, ``mark_point``, ``segment``,
``point``), ``selection`` (``select_detection``, ``track_target``) and ``measuring``
(``measure_object_geometry``, ``measure_image_points``, ``inspect_contact_geometry``,
``inspect_release_geometry``, ``compare_object_observations``) over the shared state and
helpers of ``perception_base``; this module puts them together.

Frames and units: positions in the robot base frame (z up), metres; quaternions
``[w, x, y, z]``; pixel coordinates normalised ``(u, v)`` in [0, 1], u from the left,
v from the top. Cameras: ``"agentview"`` (head) and ``"robot0_eye_in_hand"`` (wrist).
"""

from __future__ import annotations

from pathlib import Path

from captain_backends.core.driver import RobotDriver
from captain_perception.core.measuring import MeasurementCalls
from captain_perception.core.observing import ObservingCalls
from captain_perception.core.perception_base import (
    CAMERA_ALIASES,
    GRANULARITIES,
    IMAGE_SUFFIX,
    SAME_REGION_OVERLAP,
    SELECT_CRITERIA,
    PerceptionConfig,
)
from captain_perception.core.robot_state import RobotStateProvider
from captain_perception.core.selection import SelectionCalls

__all__ = ["CAMERA_ALIASES", "GRANULARITIES", "IMAGE_SUFFIX", "SAME_REGION_OVERLAP", "SELECT_CRITERIA",
           "Perception", "PerceptionConfig", "build"]


class Perception(ObservingCalls, SelectionCalls, MeasurementCalls):
    """Perception and measurement primitives over one driver (see the module docstring); the
    constructor's arguments are ``PerceptionBase``'s."""


def build(driver: RobotDriver, workspace: str | Path, robot_state: RobotStateProvider | None = None) -> Perception:
    """Factory of the ``captain.primitives`` entry point: the perception and measurement
    calls over ``driver``, saving frames in ``workspace``, with the harness's robot state;
    the segmentation and pointing backends in-process or on the perception node as
    ``core.backend_choice.choose_backends`` says."""
    from captain_perception.core.backend_choice import choose_backends

    segmenter, pointer = choose_backends(driver)
    return Perception(driver, workspace, robot_state=robot_state, segmenter=segmenter, pointer=pointer)
