"""The region check the verifying cell writes, run on measurements: an object counts as in a
region goal when its measured centre is inside the region's extent (placed from the fixture's
measured centre, along the fixture's sides), not when it is near the fixture's centre.
Scenes are built from snapshots (robot base at (-0.66, 0, 0.912) in the world)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_harness.core.episode.gate import inside_walls, standards_for
from captain_harness.core.episode.table_regions import TableRegion, table_regions_in
from captain_teacher.boxes import rot_z
from captain_teacher.planners.destinations import destination_for
from captain_teacher.planners.evidence import relation_check
from captain_teacher.scene import SceneView

T_WORLD_BASE = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
YAW_90 = (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))


def _ctx(fixture: str, region: str, measured_offset_xy: tuple[float, float],
         relation: str = "on") -> tuple[SimpleNamespace, object]:
    """A scene with a black bowl and ``fixture`` turned 90 deg, the fixture's earlier
    measurement printed ``measured_offset_xy`` (m) off its box centre (a segmentation bias)."""
    objects = {"akita_black_bowl_1": ObjectPose((-0.1, 0.2, 0.93), (1.0, 0.0, 0.0, 0.0)),
               fixture: ObjectPose((-0.2, -0.1, 0.905), YAW_90)}
    goal = GoalPredicate(relation, ("akita_black_bowl_1", region), False)
    scene = SceneView(SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, objects, dict(objects), (goal,), "", "", None),
                      T_WORLD_BASE)
    measured = scene.box(fixture).center_m[:2] + np.asarray(measured_offset_xy)
    dv = "stove" if "stove" in fixture else "cabinet"
    ctx = SimpleNamespace(scene=scene, printed_history=[{dv: {"center": [*measured, 0.9]}}], table_regions={})
    return ctx, destination_for(region, relation, scene)


def _verdict(lines: list[str], check: str, object_xy: np.ndarray, fixture_xy: np.ndarray) -> bool:
    session = {"np": np, "fin": {"object": {"center_xy_m": list(object_xy)},
                                 "destination": {"center_xy_m": list(fixture_xy)},
                                 "resting_height_consistent": True}}
    exec("\n".join(lines[:-1]), session)  # the last line prints
    return bool(eval(check, session))


@pytest.mark.parametrize("bias", [(0.0, 0.0), (0.012, -0.008)])
def test_the_cook_region_is_checked_at_the_region_not_at_the_stove_centre(bias: tuple[float, float]) -> None:
    ctx, dest = _ctx("flat_stove_1", "flat_stove_1_cook_region", bias)
    lines, check, words = relation_check(ctx, "fin", "akita_black_bowl_1", dest, 0.02)
    assert "cook" not in check and "region" in words
    fixture_now = ctx.scene.box("flat_stove_1").center_m[:2] + np.asarray(bias)  # measured as before
    region = dest.region_center_m(ctx.scene)[:2]
    half = dest.half_xy_m()[0]
    assert _verdict(lines, check, region, fixture_now)
    assert _verdict(lines, check, region + np.array([0.8 * half, 0.0]), fixture_now)
    assert not _verdict(lines, check, region + np.array([1.3 * half, 0.0]), fixture_now)
    away = (region - fixture_now) / float(np.linalg.norm(region - fixture_now))
    inside_far = region + 0.8 * half * away  # in the region, far from the stove's measured centre
    assert float(np.linalg.norm(inside_far - fixture_now)) > 0.1
    assert _verdict(lines, check, inside_far, fixture_now)


def test_an_oblong_region_is_measured_along_the_fixtures_sides() -> None:
    ctx, dest = _ctx("wooden_cabinet_1", "wooden_cabinet_1_top_side", (0.0, 0.0))
    lines, check, _ = relation_check(ctx, "fin", "akita_black_bowl_1", dest, 0.02)
    hx, hy = dest.half_xy_m()
    assert hx > hy + 0.02
    fixture_now = ctx.scene.box("wooden_cabinet_1").center_m[:2]
    region = dest.region_center_m(ctx.scene)[:2]
    long_side = rot_z(ctx.scene.yaw("wooden_cabinet_1"))[:2, 0]  # the cabinet's x axis, base y here
    short_side = rot_z(ctx.scene.yaw("wooden_cabinet_1"))[:2, 1]
    between = 0.5 * (hx + hy)
    assert _verdict(lines, check, region + between * long_side, fixture_now)
    assert not _verdict(lines, check, region + between * short_side, fixture_now)


def test_a_relation_to_an_object_keeps_the_tasks_tolerance() -> None:
    ctx, _ = _ctx("flat_stove_1", "flat_stove_1_cook_region", (0.0, 0.0))
    plate = destination_for("akita_black_bowl_1", "on", ctx.scene)  # any object destination
    lines, check, _ = relation_check(ctx, "fin", "flat_stove_1", plate, 0.02)
    assert check == 'fin["xy_distance_m"] <= 0.02 and fin["resting_height_consistent"]'
    assert len(lines) == 1 and lines[0].startswith("print(")


@pytest.mark.parametrize("yaw", [0.0, 0.6])
def test_a_table_region_is_checked_against_the_rectangle_task_md_states(yaw: float) -> None:
    """A region of the table (nothing there to click): the cell checks the measured object
    centre against the rectangle the teacher read from TASK.md, exactly as the gate does,
    wherever the fixture it is named after was measured."""
    name = "main_table_stove_front_region"
    [standard] = standards_for([f"On(akita_black_bowl_1, {name})"], None,
                               {name: TableRegion((0.61, 0.21), (0.04, 0.025), yaw)})
    ctx, dest = _ctx("flat_stove_1", name, (0.0, 0.0))
    ctx.table_regions = table_regions_in(standard.describe())  # as the policy reads TASK.md
    region = ctx.table_regions[name]
    lines, check, words = relation_check(ctx, "fin", "akita_black_bowl_1", dest, 0.02)
    assert "TASK.md" in words and "object_over_destination" not in check
    rng = np.random.default_rng(0)
    stove = ctx.scene.box("flat_stove_1").center_m[:2]
    verdicts = []
    for xy in np.array([0.61, 0.21]) + rng.uniform(-0.06, 0.06, size=(200, 2)):
        verdicts.append(_verdict(lines, check, xy, stove + rng.normal(0, 0.02, 2)))
        assert verdicts[-1] == region.contains(xy), xy
    assert 20 < sum(verdicts) < 180


def test_inside_a_container_the_walls_stand_in_for_resting() -> None:
    """``In`` a drawer of the cabinet: the cell checks the object's lowest seen point inside
    the walls as the gate does (``gate.inside_walls``), whatever the resting flag says."""
    ctx, dest = _ctx("wooden_cabinet_1", "wooden_cabinet_1_top_region", (0.0, 0.0), relation="in")
    assert dest.container and dest.relation == "in"
    lines, check, _ = relation_check(ctx, "fin", "akita_black_bowl_1", dest, 0.02)
    assert "resting_height_consistent" not in check and "lowest_point_z_m" in check
    region = dest.region_center_m(ctx.scene)[:2]
    fixture_now = ctx.scene.box("wooden_cabinet_1").center_m[:2]
    for low, top in ((0.05, 0.2), (0.185, 0.2), (0.17, 0.2), (0.25, 0.2)):
        fin = {"object": {"center_xy_m": list(region), "lowest_point_z_m": low},
               "destination": {"center_xy_m": list(fixture_now), "top_z_m": top},
               "resting_height_consistent": False}
        session = {"np": np, "fin": fin}
        exec("\n".join(lines[:-2]), session)  # the last two lines print
        assert bool(eval(check, session)) == inside_walls(fin), (low, top)
