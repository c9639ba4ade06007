"""What a LIBERO start perturbs, checked against the scene: wide layouts of the tasks
whose official states are not at rest when loaded (they never built one before), the
record of the objects moved, and LIBERO-PRO swap and shift variants loaded by name."""

from __future__ import annotations

import re

import numpy as np
import pytest

from captain_backends.core.libero import LiberoDriver
from captain_backends.core.libero.errors import LayoutError
from captain_backends.core.libero.perturbation import MAX_REDRAWS
from captain_backends.core.libero.variants import WIDE_LAYOUT_OPTIONS

pytestmark = [pytest.mark.sim, pytest.mark.slow]


def _positions(driver: LiberoDriver) -> dict[str, np.ndarray]:
    return {name: np.array(pose.position_m) for name, pose in driver.snapshot().object_poses.items()}


@pytest.mark.parametrize("task_id", ["libero_10/0", "libero_spatial/5"])
def test_wide_layout_builds_and_its_record_matches_the_scene(task_id):
    # libero_10/0: objects start inside the floor and are thrown up; libero_spatial/5: the
    # bowl slides off its ramekin. Both land after ~1 s; a layout is sampled only then.
    drv = LiberoDriver(task=task_id, init_state=11, settle_s=1.5, **WIDE_LAYOUT_OPTIONS)
    drv.configure()
    try:
        info = drv.reset(seed=7)
        record = info.extra["perturbation"]
        assert info.extra["perturb_axes"] == ["object_layout", "lighting", "camera_view", "object_attributes"]
        assert record["seed"] == 7 and record["layout"] == "wide" and info.init_state == -1
        assert record["layout_redraws"] == len(record["failed_base_states"])
        assert set(record["appearance"]) >= {"light_scale", "camera_shift_m", "materials_tinted"}
        moved = record["moved_objects"]
        assert len(moved) >= 4
        wide = _positions(drv)
        drv.reset(init_state=record["base_init_state"])  # the official state it started from, settled
        official = _positions(drv)
        for name, d in moved.items():
            actual = wide[name][:2] - official[name][:2]
            # the record says where each object was put; it then settles (a few mm)
            assert np.allclose(actual, [d["dx_m"], d["dy_m"]], atol=0.02), (name, actual, d)
        assert max(np.hypot(d["dx_m"], d["dy_m"]) for d in moved.values()) > 0.02
        assert drv.reset(init_state=11).extra["perturb_axes"] == ["lighting", "camera_view", "object_attributes"]
    finally:
        drv.shutdown()


def test_redrawn_starts_are_counted():
    # objects kept where the official state has them (no spread): a state where two
    # objects' bounding circles come closer than the clearance gives no layout, and
    # another state is drawn; the record counts the redraws, and a seed whose every
    # drawn state fails ends in a LayoutError naming them (no start is silently lost)
    drv = LiberoDriver(task="libero_object/0", random_layout=True, layout_attempts=1, layout_spread_m=0.0)
    drv.configure()
    records, failures = [], []
    try:
        for seed in range(6):
            try:
                records.append(drv.reset(seed=seed).extra["perturbation"])
            except LayoutError as exc:
                failures.append(str(exc))
    finally:
        drv.shutdown()
    redrawn = [r for r in records if r["layout_redraws"]]
    assert redrawn, [r["layout_redraws"] for r in records]
    for r in redrawn:
        assert len(set(r["failed_base_states"])) == r["layout_redraws"]
        assert r["base_init_state"] not in r["failed_base_states"]
        assert not set(r["failed_base_states"]) & set(range(11, 17))  # never a held-out state
    for message in failures:  # the first draw and MAX_REDRAWS more, each named
        assert re.search(rf"no wide layout from official states \[(\d+, ){{{MAX_REDRAWS}}}\d+\]", message), message


def test_pro_swap_and_shift_variants_load_by_name_and_state_their_moves():
    drv = LiberoDriver(task="libero_goal/0", init_state=11)
    drv.configure()
    try:
        official = _positions(drv)
        assert drv.task_info().extra["perturb_axes"] == []
        swap = drv.load_task("libero_goal_swap/0", init_state=11)
        assert swap.extra["perturb_axes"] == ["object_position_swap"]
        record = swap.extra["perturbation"]
        assert record["variant"] == "swap" and record["base_suite"] == "libero_goal"
        swapped = _positions(drv)
        moves = record["region_moves"]
        assert moves, record
        for name, move in moves.items():
            if name in swapped and name in official:  # the scene moved the object as stated
                actual = swapped[name][:2] - official[name][:2]
                assert np.allclose(actual, [move["dx_m"], move["dy_m"]], atol=0.05), (name, actual, move)
        base = drv.load_task("libero_object/0", init_state=11)
        base_positions = _positions(drv)
        shift = drv.load_task("libero_object_temp_x0.3/0", init_state=11)
        assert "alphabet soup" in shift.instruction and "alphabet soup" in base.instruction
        assert shift.extra["perturb_axes"] == ["object_position_shift"]
        moves = shift.extra["perturbation"]["region_moves"]
        shifted = _positions(drv)
        target = next(n for n, m in moves.items() if not m.get("off_scene"))
        assert abs(moves[target]["dx_m"]) > 0.1
        assert shifted[target][0] - base_positions[target][0] == pytest.approx(moves[target]["dx_m"], abs=0.05)
    finally:
        drv.shutdown()


def test_a_shipped_state_that_parks_a_goal_object_off_the_table_cannot_be_built():
    # LIBERO-PRO's libero_object_temp_y0.5 states put the basket 10 m to the side: no policy
    # could succeed, so loading it is a start that cannot be built (the rollout counts it
    # as such) rather than an episode. A distractor parked off the table (the milk in
    # libero_object_temp_x0.5/0) leaves the task possible, and that start builds.
    drv = LiberoDriver(task="libero_object_temp_y0.5/2", init_state=11)
    try:
        with pytest.raises(LayoutError, match=r"puts basket_1 at \[[^\]]*10\.\d+[^\]]*\] m .*cannot be built"):
            drv.configure()
    finally:
        drv.shutdown()
    drv = LiberoDriver(task="libero_object_temp_x0.5/0", init_state=11)
    drv.configure()
    try:
        positions = _positions(drv)
        assert max(abs(v) for v in positions["milk_1"][:2]) > 5.0  # parked, not named by the goal
        assert drv.task_info().init_state == 11
    finally:
        drv.shutdown()
