"""What the teacher reads back: cell results formatted by the harness's own formatter,
in rendered histories, parsed into printed values, receipts and failures."""

from __future__ import annotations

from captain_harness.core.episode.cells import format_cell_output
from captain_teacher.feedback import Feedback, last_cells, parse_values


def _tool(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": [{"type": "text", "text": text}]}


def test_printed_literals_are_read_back_from_formatted_cells() -> None:
    stdout = "\n".join([
        "tcp: [0.45, 0.0244, 0.2733]",
        "bowl: {'center': [0.6, 0.21, 0.013], 'top': 0.0388, 'radius': 0.056}",
        "held: True",
        "descent: target_reached",  # not a literal: skipped
        "a line without a value",
    ])
    receipts = ["move_to: ok; stopped_reason=target_reached executed_distance_m=0.1",
                "move_to: FAILED contact; executed_distance_m=0.04 max_observed_force_n=12.9"]
    text = format_cell_output(3, 1.25, stdout, receipts)
    values = parse_values(text)
    assert values["tcp"] == [0.45, 0.0244, 0.2733]
    assert values["bowl"]["radius"] == 0.056 and values["held"] is True
    assert "descent" not in values
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]},
        _tool("a", format_cell_output(2, 0.1, "held: False", [])),
        {"role": "assistant", "content": "", "tool_calls": [{"id": "b"}, {"id": "c"}]},
        _tool("b", text),
        _tool("c", format_cell_output(4, 0.1, "", [], error="Traceback (most recent call last):\nNameError: x")),
    ]
    cells = last_cells(messages)
    assert len(cells) == 2 and not cells[0].failed and cells[1].failed
    fb = Feedback(3, None, cells)
    assert fb.values["held"] is True  # from the last reply only, not the earlier "held: False"
    assert fb.failed and fb.receipt_failed("move_to") and not fb.receipt_failed("hold")
    assert cells[0].receipts == receipts


def test_timed_out_cells_count_as_failed() -> None:
    text = format_cell_output(5, 120.0, "partial", [], timed_out=True, timeout_s=120.0)
    messages = [{"role": "assistant", "content": "", "tool_calls": [{"id": "t"}]}, _tool("t", text)]
    assert last_cells(messages)[0].failed


def test_the_relation_one_region_for_both_is_read_from_the_failed_measurement() -> None:
    # the verifying cell measures each relation in turn; the second pair is one region of the
    # head image, and the traceback names the call (the look from above then goes to its plate)
    from captain_teacher.planners.verify import one_region_object

    stdout = "white mug -> plate: 0.0103 True"
    error = ("Traceback (most recent call last):\n"
             '  File "<cell 13>", line 12, in <module>\n'
             '    fin2 = need(robot.measure_object_geometry(ymug_f, plate_f2), "measure")\n'
             "RuntimeError: measure failed: invalid_argument: det_13 and det_12 are the same region of "
             "agentview (6168 of 6168 pixels shared), so their offset would mean nothing")
    receipts = ["measure_object_geometry: ok; object=det_11 destination=det_10 xy_distance_m=0.01025",
                "measure_object_geometry: FAILED invalid_argument"]
    text = format_cell_output(13, 0.2, stdout, receipts, error=error)
    messages = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]}, _tool("a", text)]
    assert one_region_object(Feedback(14, None, last_cells(messages))) == "ymug_f"
    ok = format_cell_output(13, 0.2, stdout, receipts[:1])
    messages = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]}, _tool("a", ok)]
    assert one_region_object(Feedback(14, None, last_cells(messages))) == ""


def test_the_relation_measured_outside_its_check_is_read_from_the_printed_lines() -> None:
    # a relation printed just over the tolerance (or not resting) is the one looked at again
    # from the wrist camera; one within it is not, whatever its position among the lines
    from types import SimpleNamespace

    import numpy as np

    from captain_backends.core.snapshot import ObjectPose, SimSnapshot
    from captain_teacher.planners.destinations import destination_for
    from captain_teacher.planners.verify import Relation, outside_object
    from captain_teacher.scene import SceneView

    up = (0.707, 0.0, 0.0, 0.707)
    objects = {n: ObjectPose(p, up) for n, p in (("porcelain_mug_1", (0.0, -0.3, 0.45)),
                                                  ("white_yellow_mug_1", (0.0, 0.3, 0.45)),
                                                  ("plate_1", (0.0, -0.3, 0.44)), ("plate_2", (0.0, 0.3, 0.44)))}
    T_world_base = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
    scene = SceneView(SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, objects, dict(objects), (), "", "", None), T_world_base)
    ctx = SimpleNamespace(scene=scene, cameras={}, shut_check=None)
    relations = [Relation("porcelain_mug_1", destination_for("plate_1", "on", scene)),
                 Relation("white_yellow_mug_1", destination_for("plate_2", "on", scene))]

    def printed(stdout: str) -> Feedback:
        text = format_cell_output(13, 0.2, stdout, [])
        return Feedback(14, None, last_cells([{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]},
                                              _tool("a", text)]))

    white, yellow = "white mug -> plate:", "yellow and white mug -> plate:"
    assert outside_object(ctx, relations, printed(
        f"{white} 0.0103 True\n{yellow} 0.0374 True\nwithin tolerance: False")) == "ymug_f"
    assert outside_object(ctx, relations, printed(
        f"{white} 0.0151 False\n{yellow} 0.0104 True\nwithin tolerance: False")) == "mug_f"
    assert outside_object(ctx, relations, printed(
        f"{white} 0.0151 True\n{yellow} 0.0104 True\nwithin tolerance: True")) == ""
    assert outside_object(ctx, relations, None) == ""
    # plainly elsewhere (21 cm off): set right, not measured again
    assert outside_object(ctx, relations, printed(
        f"{white} 0.0103 True\n{yellow} 0.2127 False\nwithin tolerance: False")) == ""
