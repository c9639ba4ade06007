"""The helper library the teacher defines once in the session and reuses: four small
functions, ``val``, ``need``, ``downq`` and ``go`` (the names of the published data's
helper library), written as a person would write them.

* ``val(r, *keys)``: the value of a result, or an entry inside it; None if the call failed.
* ``need(r, what)``: the value of a result that must have succeeded; otherwise the cell
  stops with the failure category and message.
* ``downq(jaw_yaw)``: a top-down grasp quaternion ``[w, x, y, z]``, turned about the
  vertical by ``jaw_yaw`` rad (0: the jaws close along the base y axis, the published
  ``[0, 2**-0.5, 2**-0.5, 0]``; ``-pi/4`` gives ``[0, cos(pi/8), sin(pi/8), 0]``).
* ``go(p, q, **kw)``: preview a ``move_to`` and execute it only when the preview says it
  runs; returns the move's result (or the failed preview). A pose refused for a joint limit
  or by the IK (a wrist flip on the way) is tried with the jaws turned 180 deg about the TCP
  z axis (the jaws are symmetric).
"""

from __future__ import annotations

HELPERS_SOURCE = '''\
def val(r, *keys):
    """The value of a robot result (or an entry inside it); None if the call failed."""
    v = r.get("value") if r.get("success") else None
    for k in keys:
        if v is None:
            return None
        v = v[k]
    return v


def need(r, what="robot call"):
    """The value of a result that must have succeeded; stops the cell with the reason otherwise."""
    if not r.get("success"):
        raise RuntimeError(f"{what} failed: {r.get('failure_category')}: {r.get('message')}")
    return r["value"]


def downq(jaw_yaw=0.0):
    """Top-down grasp quaternion [w, x, y, z]; jaw_yaw (rad) turns the jaw axis about the
    vertical, counter-clockwise from the base y axis."""
    a = math.pi / 4 + jaw_yaw / 2
    return [0.0, math.cos(a), math.sin(a), 0.0]


def go(p, q, **kw):
    """Preview a move_to and run it only if the preview says it can; returns its result.
    When a joint limit or a wrist flip is in the way, the same pose with the (symmetric)
    jaws turned 180 deg about the TCP z axis is tried instead."""
    args = dict(position=[float(x) for x in p], quaternion=[float(x) for x in q], **kw)
    pv = robot.preview_motion("move_to", args)
    if not pv["success"] and pv["failure_category"] in ("joint_limit", "ik_failed"):
        w, x, y, z = args["quaternion"]
        twin = dict(args, quaternion=[-z, y, -x, w])
        if robot.preview_motion("move_to", twin)["success"]:
            print(f"go: {pv['failure_category']} in the way; the jaws are turned 180 deg instead (same grasp)")
            return robot.move_to(**twin)
    if not pv["success"]:
        print("go: preview refused:", pv["failure_category"], "-", pv["message"][:160])
        return pv
    return robot.move_to(**args)
'''

#: Names the helper library defines in the session.
HELPER_NAMES = ("val", "need", "downq", "go")
