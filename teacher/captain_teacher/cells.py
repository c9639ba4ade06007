"""Code snippets the teacher composes its cells from: observing, clicking, measuring,
formatting numbers. Each returns Python source as a person would type it.

Printed lines of the form ``<key>: <literal>`` are read back by the teacher
(``feedback.parse_values``); keep them literal-evaluable.
"""

from __future__ import annotations

from collections.abc import Sequence

from captain_teacher.context import HEAD, WRIST


def num(x: float, digits: int = 3) -> str:
    """A float as short source text (``0.05``, ``-0.012``)."""
    text = f"{float(x):.{digits}f}"
    if "." in text:  # trailing zeros of the fraction only (20 stays 20)
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def vec(values: Sequence[float], digits: int = 3) -> str:
    """A list of floats as source text."""
    return "[" + ", ".join(num(v, digits) for v in values) + "]"


def observe(attach: Sequence[str] = (HEAD,), print_tcp: bool = True, print_cameras: bool = False,
            var: str = "v") -> str:
    """Observe, attach images, optionally print the tool pose and the camera models."""
    if set(attach) == {HEAD, WRIST}:
        show = f'image({var}["images"])'
    elif attach:
        show = f'image({var}["images"][{0 if attach[0] == HEAD else 1}])'
    else:
        show = ""
    lines = [f'{var} = need(robot.observe(), "observe")', show]
    if print_tcp:
        lines += [
            f'rs = {var}["robot_state"]',
            'print("tcp:", [round(x, 4) for x in rs["end_effector_position_m"]])',
            'print("tcp_q:", [round(x, 4) for x in rs["end_effector_quaternion_wxyz"]])',
        ]
    if print_cameras:
        lines += [
            f'cams = {var}["cameras"]',
            'print("cameras:", {n: {"K": np.round(c["K"], 3).tolist(), "T": np.round(c["T_base_camera"], 5).tolist()}',
            "                   for n, c in cams.items()})",
        ]
    return "\n".join(line for line in lines if line)


def mark(var: str, camera: str, uv: tuple[float, float], label: str, granularity: str = "object",
         obs_var: str = "v") -> str:
    """Click a pixel and keep the detection id in ``var``."""
    u, v = uv
    cam = "agentview" if camera == HEAD else WRIST
    return (f'{var} = need(robot.mark_point({obs_var}["observation_handle"], "{cam}", {num(u)}, {num(v)}, '
            f'label="{label}", granularity="{granularity}"), "mark {label}")["detection_id"]')


def measure(var: str, obj_var: str, dest_var: str | None = None, shape: str | None = None,
            cameras: str | None = None) -> str:
    """Measure an object (against a destination) into ``var``."""
    args = [obj_var] + ([dest_var] if dest_var else [])
    if shape:
        args.append(f'shape="{shape}"')
    if cameras:
        args.append(f'cameras="{cameras}"')
    return f'{var} = need(robot.measure_object_geometry({", ".join(args)}), "measure")'
