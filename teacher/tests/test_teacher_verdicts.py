"""The verdict scan: a verifying cell that writes its verdict as a literal is found; one
that computes it from a measurement is not. Real teacher episodes are scanned in
``test_teacher_tabletop.py`` and ``tests/e2e/test_teacher_episodes.py``."""

from __future__ import annotations

import pytest

from captain_teacher.verdicts import literal_verdicts

#: The verifying cell the teacher wrote for goals without a relation before every goal was
#: measured.
HARD_CODED = 'v = need(robot.observe(), "observe")\nok = True\nprint("within tolerance:", ok)\n' \
             'if ok:\n    print(robot.finish()["message"])'


@pytest.mark.parametrize(("code", "found"), [
    (HARD_CODED, ["ok = True"]),
    ('ok = 1 > 0\nif ok:\n    robot.finish()', ["ok = 1 > 0"]),
    ('print("within tolerance:", True)', ['print("within tolerance:", True)']),
    ('if not False:\n    f = robot.finish(summary="done")', ["if not False:"]),
    ('ok: bool = True\nprint("within tolerance:", ok)', ["ok: bool = True"]),
])
def test_literal_verdicts_are_found(code: str, found: list[str]) -> None:
    assert literal_verdicts(code) == found


@pytest.mark.parametrize("code", [
    'fin = need(robot.measure_object_geometry(bowl_f, plate_f), "measure")\n'
    'ok = fin["xy_distance_m"] <= 0.02 and fin["resting_height_consistent"]\n'
    'print("within tolerance:", ok)\nif ok:\n    print(robot.finish()["message"])',
    'print("knob turned:", round(knob_turned, 3))\nok = knob_turned >= 0.5\nprint("within tolerance:", ok)',
    # a literal that is not a verdict, and an unconditional finish after an earlier check
    'knob_turned = 0.0\nr = go(p, q)\nf = robot.finish(summary="measured in tolerance")',
    "this is not python (",
])
def test_verdicts_computed_from_measurements_pass(code: str) -> None:
    assert literal_verdicts(code) == []
