"""Tabletop tasks without physics: goal geometry, seeded layouts, task lookup."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from captain_backends.core.tabletop.scene import OBJECTS, PLACEMENT_X_RANGE_M, PLACEMENT_Y_RANGE_M
from captain_backends.core.tabletop.tasks import (
    TASKS,
    UnknownTaskError,
    get_task,
    object_by_name,
    on_support,
    sample_layout,
)


def test_layouts_are_seeded_and_never_overlap() -> None:
    assert sample_layout(np.random.default_rng(5)) == sample_layout(np.random.default_rng(5))
    assert sample_layout(np.random.default_rng(5)) != sample_layout(np.random.default_rng(6))
    for seed in range(200):
        layout = sample_layout(np.random.default_rng(seed))
        assert set(layout) == {o.name for o in OBJECTS}
        for (a, (xa, ya, _)), (b, (xb, yb, _)) in itertools.combinations(layout.items(), 2):
            gap = np.hypot(xa - xb, ya - yb)
            assert gap >= object_by_name(a).min_clearance_m + object_by_name(b).min_clearance_m
        for x, y, yaw in layout.values():
            assert PLACEMENT_X_RANGE_M[0] <= x <= PLACEMENT_X_RANGE_M[1]
            assert PLACEMENT_Y_RANGE_M[0] <= y <= PLACEMENT_Y_RANGE_M[1]
            assert abs(yaw) <= np.pi / 4


def test_on_support_geometry() -> None:
    cube, plate = object_by_name("red_cube"), object_by_name("plate")
    plate_pos = np.array([0.0, 0.0, 0.806])
    assert on_support(cube, np.array([0.05, 0.03, 0.832]), plate, plate_pos, 0.0)
    assert not on_support(cube, np.array([0.09, 0.0, 0.832]), plate, plate_pos, 0.0)  # off the rim
    assert not on_support(cube, np.array([0.0, 0.0, 0.805]), plate, plate_pos, 0.0)  # below its top
    blue = object_by_name("blue_cube")
    blue_pos = np.array([0.0, 0.0, 0.82])
    # 0.026 m along world x is past the face of an unrotated 4 cm cube but inside the
    # same cube turned by 45 degrees (its corner points along x).
    top = np.array([0.026, 0.0, 0.86])
    assert not on_support(cube, top, blue, blue_pos, 0.0)
    assert on_support(cube, top, blue, blue_pos, np.pi / 4)


def test_task_lookup() -> None:
    assert get_task("tabletop/stack_cubes") is TASKS["stack_cubes"]
    assert get_task("cube_on_plate").goal_text == "On(red_cube, plate)"
    assert get_task("pick_cube").goal_text == "Lifted(red_cube)"
    with pytest.raises(UnknownTaskError, match="valid tasks: cube_on_plate, pick_cube, stack_cubes"):
        get_task("tabletop/juggle")
