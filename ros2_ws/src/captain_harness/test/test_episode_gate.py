"""The completion gate judges finish() on the agent's own recorded calls only."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from episode_support import ToyWorld

from captain_harness.core.api import RobotAPI
from captain_harness.core.episode.gate import (
    FINISH_REJECTED,
    CompletionGate,
    GateConfig,
    parse_goal,
    standards_for,
)
from captain_harness.core.episode.table_regions import TableRegion, table_regions_in


@pytest.fixture
def setup(tmp_path: Path):
    world = ToyWorld(tmp_path)
    api = RobotAPI()
    api.register_object(world)
    gate = CompletionGate(standards_for(["On(akita_black_bowl_1, plate_1)"]), GateConfig())
    api.register("finish", gate.primitive(api), group="finish")
    return world, api, gate


def _gated(tmp_path: Path, standards: list, **world_options) -> tuple[ToyWorld, RobotAPI, CompletionGate]:
    """A toy world behind a ``RobotAPI`` whose ``finish`` is a gate with ``standards``."""
    world = ToyWorld(tmp_path, **world_options)
    api = RobotAPI()
    api.register_object(world)
    gate = CompletionGate(standards, GateConfig())
    api.register("finish", gate.primitive(api), group="finish")
    return world, api, gate


def mark(api: RobotAPI) -> tuple[str, str]:
    """A fresh observation with the bowl and the plate marked in it: their detection ids."""
    h = api.call("observe").result["value"]["observation_handle"]
    b = api.call("mark_point", (h, "agentview", 0.5, 0.5), {"label": "bowl"}).result["value"]["detection_id"]
    p = api.call("mark_point", (h, "agentview", 0.5, 0.5), {"label": "plate"}).result["value"]["detection_id"]
    return b, p


def measure(api: RobotAPI) -> dict:
    return api.call("measure_object_geometry", mark(api)).result


def place(api: RobotAPI, world: ToyWorld, dx: float = 0.0) -> None:
    api.call("move_to", (world.objects["bowl"].tolist(),))
    api.call("move_to", (), {"gripper": "close"})
    api.call("move_to", ((world.objects["plate"] + [dx, 0, 0.03]).tolist(),))
    api.call("move_to", (), {"gripper": "open"})


def test_goals_parse_into_standards() -> None:
    assert parse_goal("On(akita_black_bowl_1, plate_1)") == ("on", ("akita_black_bowl_1", "plate_1"))
    assert parse_goal("(In bowl basket)") == ("in", ("bowl", "basket"))
    kinds = [s.kind for s in standards_for(["On(a, b)", "Open(top_drawer)", "Upright(cup)"])]
    assert kinds == ["relation", "articulation", "other"]
    assert "0.02 m" in standards_for(["On(a, b)"])[0].describe()


def test_finish_with_fresh_passing_measurement_is_accepted(setup) -> None:
    world, api, gate = setup
    measure(api)
    place(api, world)
    assert measure(api)["value"]["xy_distance_m"] < 0.02
    out = api.call("finish")
    assert out.result["success"] and out.result["value"]["accepted"] and gate.accepted_on_evidence
    assert out.receipt.startswith("finish: ok; accepted evidence=#")


def test_rejected_twice_then_accepted_and_reasons_teach(setup) -> None:
    world, api, gate = setup
    out = api.call("finish")
    assert out.result["failure_category"] == FINISH_REJECTED and "no physical action" in out.result["message"]
    place(api, world, dx=0.05)  # 5 cm off the plate
    out = api.call("finish")
    assert "no measure_object_geometry" in out.receipt and "move_to, call #" in out.receipt
    assert out.result["value"]["rejections_left"] == 0
    out = api.call("finish")
    assert out.result["success"] and out.result["value"]["accepted"] and not gate.accepted_on_evidence
    assert gate.attempts == 3 and len(gate.rejections) == 2


def test_measurement_out_of_tolerance_is_rejected(setup) -> None:
    world, api, _gate = setup
    place(api, world, dx=0.05)
    measure(api)
    out = api.call("finish")
    assert not out.result["success"] and "xy_distance_m=0.0500 m (tolerance 0.02 m)" in out.result["message"]


def test_measurement_before_the_last_action_or_with_stale_detections_does_not_count(setup) -> None:
    world, api, _gate = setup
    place(api, world)
    b, p = mark(api)
    api.call("measure_object_geometry", (b, p))
    api.call("hold", (), {"duration_s": 0.5})  # a physical action after the measurement
    out = api.call("finish")
    assert "no measure_object_geometry" in out.result["message"] and "hold, call #" in out.result["message"]
    api.call("measure_object_geometry", (b, p))  # fresh call, but detections from before the hold
    out = api.call("finish")
    assert "used detections made before" in out.result["message"]


def test_a_move_of_the_empty_hand_that_touches_nothing_keeps_earlier_measurements(setup) -> None:
    world, api, gate = setup
    place(api, world)
    assert measure(api)["value"]["xy_distance_m"] < 0.02
    api.call("move_to", ([0.2, 0.3, 0.45],))  # the cameras move; nothing in the scene does
    out = api.call("finish")
    assert out.result["value"]["accepted"] and gate.accepted_on_evidence, out.result["message"]


def test_detections_made_before_a_move_that_touched_nothing_stay_fresh(setup) -> None:
    world, api, gate = setup
    place(api, world)
    b, p = mark(api)
    api.call("move_to", ([0.2, 0.3, 0.45],))
    assert api.call("measure_object_geometry", (b, p)).result["success"]
    assert api.call("finish").result["value"]["accepted"] and gate.accepted_on_evidence


@pytest.mark.parametrize("change", ["contact", "carry", "hold"])
def test_a_move_that_touches_or_carries_something_makes_earlier_measurements_stale(tmp_path: Path, change: str) -> None:
    world, api, gate = _gated(tmp_path, standards_for(["On(akita_black_bowl_1, plate_1)"]))
    place(api, world)
    assert measure(api)["value"]["xy_distance_m"] < 0.02
    if change == "contact":
        world.contact_force_n = 3.0  # the hand brushed something on the way
        api.call("move_to", ([0.2, 0.3, 0.45],))
    elif change == "carry":  # the bowl picked up again and carried back where it was
        api.call("move_to", (world.objects["bowl"].tolist(),))
        api.call("move_to", (), {"gripper": "close"})
        api.call("move_to", ((world.objects["bowl"] + [0, 0, 0.1]).tolist(),))
    else:
        api.call("hold", (), {"duration_s": 0.5})
    out = api.call("finish")
    assert not out.result["success"] and "no measure_object_geometry" in out.result["message"]
    assert "touched nothing" not in out.result["message"] and not gate.accepted_on_evidence


@pytest.mark.parametrize(("goal", "dx", "accepted"), [
    ("In(akita_black_bowl_1, plate_1_contain_region)", 0.03, True),   # inside the measured extent (4 cm)
    ("In(akita_black_bowl_1, plate_1_contain_region)", 0.06, False),  # beyond it
    ("On(akita_black_bowl_1, plate_1)", 0.03, False),                 # an object: 2 cm of its centre
])
def test_region_goals_are_judged_by_the_measured_extent(tmp_path: Path, goal: str, dx: float, accepted: bool) -> None:
    world, api, gate = _gated(tmp_path, standards_for([goal]))
    standards = gate.standards
    assert standards[0].region == goal.startswith("In(")
    assert ("footprint.radius_m" in standards[0].describe()) == standards[0].region
    place(api, world, dx=dx)
    assert abs(measure(api)["value"]["xy_distance_m"] - dx) < 1e-6
    out = api.call("finish")
    assert out.result["success"] is accepted and gate.accepted_on_evidence is accepted


def test_articulated_and_free_form_goals_need_a_fresh_look(tmp_path: Path) -> None:
    world = ToyWorld(tmp_path)
    for goals, look in ((["Open(top_drawer)"], "observe"), ([], "observe")):
        api = RobotAPI()
        api.register_object(world)
        gate = CompletionGate(standards_for(goals), GateConfig(max_rejections=5))
        api.register("finish", gate.primitive(api), group="finish")
        api.call("hold")
        assert not api.call("finish").result["success"]
        api.call(look)
        assert api.call("finish").result["value"]["accepted"] and gate.accepted_on_evidence


#: The region in front of the stove as the LIBERO driver states it (base frame, m).
FRONT = {"center_xy_m": [0.61, 0.21], "half_xy_m": [0.04, 0.04], "yaw_rad": 0.0}


def _table_gate(tmp_path: Path, bowl_xy: tuple[float, float], goals: list[str], regions: dict):
    world, api, gate = _gated(tmp_path, standards_for(goals, GateConfig(), regions), bowl_xy=bowl_xy)
    api.call("hold", (), {"duration_s": 0.1})  # the last physical action
    h = api.call("observe").result["value"]["observation_handle"]
    bowl = api.call("mark_point", (h, "agentview", 0.5, 0.5), {"label": "bowl"}).result["value"]["detection_id"]
    return world, api, gate, h, bowl


def test_a_table_region_is_stated_as_a_rectangle_the_policy_can_read_back() -> None:
    [std] = standards_for(["On(plate_1, main_table_stove_front_region)"], GateConfig(),
                          {"main_table_stove_front_region": FRONT})
    assert std.kind == "relation" and std.region and std.table_region == TableRegion((0.61, 0.21), (0.04, 0.04))
    text = std.describe()
    assert "x from 0.570 to 0.650 m, y from 0.170 to 0.250 m" in text and "measure_object_geometry(object)" in text
    assert table_regions_in(f"- {text}\n") == {"main_table_stove_front_region": std.table_region}
    turned = TableRegion((0.5, 0.0), (0.1, 0.02), math.pi / 2)  # long axis along base y
    assert turned.contains((0.5, 0.09)) and not turned.contains((0.59, 0.0))
    [std] = standards_for(["On(a, main_table_x_region)"], None, {"main_table_x_region": turned})
    assert table_regions_in(std.describe())["main_table_x_region"].yaw_rad == pytest.approx(math.pi / 2, abs=1e-3)
    with pytest.raises(ValueError, match="positive half sizes"):
        standards_for(["On(a, r)"], None, {"r": {"center_xy_m": [0, 0], "half_xy_m": [0, 0.1], "yaw_rad": 0}})


@pytest.mark.parametrize(("bowl_xy", "with_destination", "accepted"), [
    ((0.63, 0.19), False, True),   # inside the rectangle, measured alone
    ((0.63, 0.19), True, True),    # inside, measured against something else: the destination is not used
    ((0.66, 0.19), False, False),  # 1 cm beyond its far edge
])
def test_a_table_region_goal_is_judged_by_the_object_centre_in_the_rectangle(
        tmp_path: Path, bowl_xy: tuple[float, float], with_destination: bool, accepted: bool) -> None:
    _world, api, gate, h, bowl = _table_gate(tmp_path, bowl_xy, ["On(bowl_1, main_table_stove_front_region)"],
                                             {"main_table_stove_front_region": FRONT})
    if with_destination:
        plate = api.call("mark_point", (h, "agentview", 0.5, 0.5), {"label": "plate"}).result["value"]["detection_id"]
        api.call("measure_object_geometry", (bowl, plate))
    else:
        api.call("measure_object_geometry", (bowl,))
    out = api.call("finish")
    assert out.result["success"] is accepted and gate.accepted_on_evidence is accepted
    if not accepted:
        assert "x from 0.570 to 0.650 m" in out.result["message"] and "[0.6600, 0.1900]" in out.result["message"]


def test_a_table_region_needs_a_fresh_resting_measurement_per_goal(tmp_path: Path) -> None:
    regions = {"main_table_stove_front_region": FRONT,
               "main_table_plate_right_region": {"center_xy_m": [0.62, 0.2], "half_xy_m": [0.05, 0.05], "yaw_rad": 0}}
    goals = ["On(bowl_1, main_table_stove_front_region)", "On(cup_1, main_table_plate_right_region)"]
    world, api, gate, h, bowl = _table_gate(tmp_path, (0.62, 0.2), goals, regions)
    api.call("measure_object_geometry", (bowl,))
    out = api.call("finish")  # one object in both rectangles does not meet two goals
    assert not out.result["success"] and "On(cup_1, main_table_plate_right_region)" in out.result["message"]
    api.call("move_to", (world.objects["bowl"].tolist(),))
    api.call("move_to", (), {"gripper": "close"})  # held: not resting
    h = api.call("observe").result["value"]["observation_handle"]
    fresh = api.call("mark_point", (h, "agentview", 0.5, 0.5), {"label": "bowl"}).result["value"]["detection_id"]
    api.call("measure_object_geometry", (bowl,))
    assert "used detections made before" in api.call("finish").result["message"]
    api.call("measure_object_geometry", (fresh,))
    out = api.call("finish")
    assert "resting_height_consistent=False" in out.result["message"] and not gate.accepted_on_evidence


@pytest.mark.parametrize(("goal", "dz", "accepted"), [
    ("In(akita_black_bowl_1, plate_1_contain_region)", -0.005, True),  # held low, 2.5 cm inside the walls
    ("In(akita_black_bowl_1, plate_1_contain_region)", 0.01, False),   # 1 cm inside: short of 2 cm
    ("On(akita_black_bowl_1, flat_stove_1_cook_region)", -0.005, False),  # on a region: resting still counts
])
def test_the_inside_of_a_region_is_judged_by_the_walls_not_by_resting(tmp_path: Path, goal: str, dz: float,
                                                                      accepted: bool) -> None:
    """Seen into a container, an object's foot is hidden and resting cannot be told: for
    ``In`` the object's lowest seen point inside the destination's walls (2 cm below its
    measured top) stands in for it, and TASK.md says so."""
    world, api, gate = _gated(tmp_path, standards_for([goal]))
    standards = gate.standards
    assert standards[0].inside == goal.startswith("In(")
    assert ("lowest_point_z_m" in standards[0].describe()) == standards[0].inside
    api.call("move_to", (world.objects["bowl"].tolist(),))
    api.call("move_to", (), {"gripper": "close"})
    api.call("move_to", ((world.objects["plate"] + [0.03, 0, 0.02 + dz]).tolist(),))  # held: not resting
    value = measure(api)["value"]
    assert value["resting_height_consistent"] is False
    assert value["object"]["lowest_point_z_m"] == pytest.approx(value["destination"]["top_z_m"] - 0.02 + dz)
    out = api.call("finish")
    assert out.result["success"] is accepted and gate.accepted_on_evidence is accepted
    if not accepted and standards[0].inside:
        assert "lowest seen point" in out.result["message"]


SHUT_IN = ["In(akita_black_bowl_1, plate_1_bottom_region)", "Close(plate_1_bottom_region)"]


def _released_inside(tmp_path: Path, goals: list[str]) -> tuple[ToyWorld, RobotAPI, CompletionGate]:
    """The bowl released into the plate standing for a drawer (its top raised 3 cm, so the
    released bowl's lowest point is inside its walls)."""
    tmp_path.mkdir(exist_ok=True)
    world, api, gate = _gated(tmp_path, standards_for(goals))
    world.objects["plate"] = world.objects["plate"] + [0.0, 0.0, 0.03]
    place(api, world, dx=0.01)
    return world, api, gate


def test_the_inside_of_a_part_another_goal_shuts_is_measured_after_the_release(tmp_path: Path) -> None:
    """Once the drawer is shut no camera sees the bowl: ``In`` into a region a ``Close``
    goal shuts counts when measured after the last release of the gripper; the shut part
    still needs its fresh look after the last physical action, and TASK.md says both."""
    world, api, gate = _released_inside(tmp_path, SHUT_IN)
    inside, close = gate.standards
    assert inside.closed_by == "plate_1_bottom_region" and close.closed_by is None
    assert "last release of the gripper" in inside.describe() and "before you shut it" in inside.describe()
    assert measure(api)["success"]
    world.contact_force_n = 6.0
    api.call("move_to", ([0.3, 0.0, 0.3],))  # pushing it shut
    out = api.call("finish")
    assert not out.result["success"] and "no fresh" in out.result["message"]
    api.call("observe")
    out = api.call("finish")
    assert out.result["success"] and gate.accepted_on_evidence


def test_a_measurement_before_the_last_release_or_without_a_shutting_goal_does_not_count(tmp_path: Path) -> None:
    # no goal shuts the region: the measurement must follow the last physical action
    world, api, gate = _released_inside(tmp_path / "a", SHUT_IN[:1])
    assert gate.standards[0].closed_by is None
    assert measure(api)["success"]
    world.contact_force_n = 6.0
    api.call("move_to", ([0.3, 0.0, 0.3],))  # pushing something
    api.call("observe")
    out = api.call("finish")
    assert not out.result["success"] and "no measure_object_geometry" in out.result["message"]
    # measured, then grasped and released again: the measurement no longer counts
    world, api, gate = _released_inside(tmp_path / "b", SHUT_IN)
    assert measure(api)["success"]
    place(api, world, dx=0.01)
    api.call("observe")
    out = api.call("finish")
    assert not out.result["success"] and "last release of the gripper" in out.result["message"]
    # detections made before the release do not count either
    (tmp_path / "c").mkdir()
    world, api, gate = _gated(tmp_path / "c", standards_for(SHUT_IN))
    world.objects["plate"] = world.objects["plate"] + [0.0, 0.0, 0.03]
    h = api.call("observe").result["value"]["observation_handle"]
    b = api.call("mark_point", (h, "agentview", 0.5, 0.5), {"label": "bowl"}).result["value"]["detection_id"]
    p = api.call("mark_point", (h, "agentview", 0.5, 0.5), {"label": "plate"}).result["value"]["detection_id"]
    place(api, world, dx=0.01)
    assert api.call("measure_object_geometry", (b, p)).result["success"]
    api.call("observe")
    out = api.call("finish")
    assert not out.result["success"] and not gate.accepted_on_evidence
