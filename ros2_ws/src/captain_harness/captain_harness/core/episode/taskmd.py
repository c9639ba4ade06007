"""TASK.md, generated per task: the instruction, the success standard per goal predicate
with its tolerances, budgets and finish rules, the session, frames and units, and the
API reference built from the registered primitives' signatures and docstrings."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

from captain_harness.core.api import PrimitiveSpec
from captain_harness.core.budget import BudgetLimits
from captain_harness.core.episode.gate import GateConfig, GoalStandard

#: Order and titles of the API groups in TASK.md.
GROUP_TITLES = (("perception", "Perception"), ("measurement", "Measurement"), ("motion", "Motion"),
                ("planning", "Planning (read-only)"), ("state", "State"), ("", "Other calls"),
                ("finish", "Finishing"))


@dataclass
class TaskMdContext:
    """Everything TASK.md states besides the API.

    Attributes:
        instruction: the task in words.
        standards: the success standard of each goal predicate (from the gate).
        limits: the episode budgets.
        gate: the gate settings (rejections, tolerance).
        workspace: the working directory as the session sees it.
        cell_timeout_s: a cell's time limit, s.
        max_output_tokens: token budget of one cell's output.
        max_images: images kept in the history.
    """

    instruction: str
    standards: Sequence[GoalStandard]
    limits: BudgetLimits
    gate: GateConfig
    workspace: str
    cell_timeout_s: float
    max_output_tokens: int
    max_images: int = 12


def signature_text(spec: PrimitiveSpec) -> str:
    """``(position=None, quaternion=None, *, speed=0.05)`` with annotations as written."""
    parts = []
    saw_kw_only = False
    params = list(spec.signature.parameters.values())
    for p in params:
        if p.kind is p.KEYWORD_ONLY and not saw_kw_only:
            parts.append("*")
            saw_kw_only = True
        if p.kind is p.VAR_POSITIONAL:
            saw_kw_only = True
            text = f"*{p.name}"
        elif p.kind is p.VAR_KEYWORD:
            text = f"**{p.name}"
        else:
            text = p.name
        if p.annotation is not inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            ann = p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)
            text += f": {ann}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}" if ":" in text else f"={p.default!r}"
        parts.append(text)
    return f"({', '.join(parts)})"


def client_signature_text(spec: PrimitiveSpec) -> str:
    """The signature without annotations, as the session's ``robot`` module declares it."""
    try:
        params = [p.replace(annotation=inspect.Parameter.empty) for p in spec.signature.parameters.values()]
        text = str(inspect.Signature(params))
        compile(f"def _f{text}: pass", "<signature>", "exec")
        return text
    except (SyntaxError, ValueError, TypeError):
        return "(*args, **kwargs)"


def api_reference(specs: dict[str, PrimitiveSpec]) -> str:
    """The API reference section, grouped, physical actions marked with ●."""
    lines: list[str] = []
    known = {g for g, _ in GROUP_TITLES}
    for group, title in GROUP_TITLES:
        members = sorted((s for s in specs.values() if (s.group if s.group in known else "") == group),
                         key=lambda s: s.name)
        if group == "finish":
            members = [s for s in specs.values() if s.name == "finish"]
        elif any(s.name == "finish" for s in members):
            members = [s for s in members if s.name != "finish"]
        if not members:
            continue
        lines += [f"### {title}", ""]
        for spec in members:
            mark = " ● physical action" if spec.physical else ""
            lines.append(f"#### `robot.{spec.name}{signature_text(spec)}`{mark}")
            lines.append("")
            doc = spec.doc.strip()
            lines.append(doc if doc else "(no description)")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_task_md(context: TaskMdContext, specs: dict[str, PrimitiveSpec]) -> str:
    """The whole TASK.md."""
    c = context
    lim = c.limits
    standards = [s.describe(c.gate.require_resting_height) for s in c.standards] or [
        "The instruction holds in a fresh observation taken after your last physical action."]
    physical = sorted(s.name for s in specs.values() if s.physical)
    free_moves = "" if c.gate.free_motion_max_force_n < 0 else (
        "Here \"your last physical action\" is the last one that could have changed the scene: a `move_to` of the "
        "empty hand that reaches its target touching nothing (`stopped_reason` target_reached, `held` false before "
        f"and after, `max_observed_force_n` at most {c.gate.free_motion_max_force_n:g} N) only moves the cameras, so "
        "measurements made before it stay fresh (one goal measured from one viewpoint, the next from another).\n\n")
    text = f"""# TASK.md

## Task

{c.instruction.strip()}

## Success standard

The episode is judged on the final scene by the task's goal predicates. Each counts as met when:

{chr(10).join(f"- {s}" for s in standards)}

{free_moves}When your own fresh measurements show every standard is met, call `robot.finish()`. A completion gate on
the host checks only your recorded calls and their results (never the simulator). It rejects `finish()`
with the reason at most {c.gate.max_rejections} times; the call after that is accepted whatever the
evidence. An accepted `finish()` ends the episode: no physical action runs after it.

## Budgets and finish rules

- At most {lim.max_requests} requests (model replies), {lim.max_physical_actions} physical actions
  ({", ".join(physical) or "motion calls"}) and {lim.max_wall_time_s:g} s of wall time for the episode. Every
  result's `budget` entry reports what is used and what is left.
- The episode ends when `finish()` is accepted, when you reply without a python tool call, or when a
  budget runs out. A physical call without budget left fails with `budget_exhausted`.
- A cell may run for {c.cell_timeout_s:g} s; a longer one is interrupted (the session keeps its variables).

## The Python session

- The `python` tool runs code in one persistent Python 3 session: `robot`, `np` (numpy), `math` and
  `image()` are imported; scipy and Pillow are importable. Variables and functions persist across cells
  and requests.
- Working directory: `{c.workspace}` with this `TASK.md`, `NOTES.md` (your own notes; they survive
  context compaction) and the saved camera frames `obs_<k>_head.png`, `obs_<k>_wrist.png` (512 × 512).
- `image(x)` attaches camera images to the cell result: `x` is a file name in the workspace, a list of
  them, the `images` value of an `observe()` result, a uint8 array or a PIL image. At most 4 per cell.
- A cell result reads `Cell <k> completed in <s> s`, then `Output:` with what the cell printed (the value
  of a last bare expression is printed) and one receipt line per robot call (at most 20 lines). A failing
  cell shows its traceback. Output longer than about {c.max_output_tokens} tokens is cut in the middle.
- The conversation keeps the {c.max_images} most recent images; older ones read `[image omitted: ...]`.
  When the context grows too long, older requests are replaced by a notice listing what they ran.
- The session has no network and limited memory, CPU time, disk and processes; processes a cell starts
  end with the cell. The robot is reachable only through `robot`.

## Every robot call

- Never raises. Returns a dict with the keys `success`, `executed`, `failure_category`, `message`,
  `value`, `diagnostics`, `budget`. `executed` says whether anything physical happened. Bad arguments
  give `success=False` with a precise `failure_category` and a `message` that says how to fix the call.
- Adds one receipt line (at most 300 characters) to the cell output, e.g.
  `move_to: ok; stopped_reason=target_reached executed_distance_m=0.1681 max_observed_force_n=5.198`.

## Frames and units

- Metres, seconds, newtons, radians. Positions are in the robot base frame, z up.
- Quaternions are `[w, x, y, z]`: `q=[0, 2**-0.5, 2**-0.5, 0]` is a top-down grasp and
  `[0, math.cos(math.pi/8), math.sin(math.pi/8), 0]` the same grasp turned 45° about the vertical.
- Pixel coordinates are normalised `(u, v)` in [0, 1], u from the left edge, v from the top.
- Cameras: `"agentview"` (head) and `"robot0_eye_in_hand"` (wrist).

## API reference

{api_reference(specs)}"""
    return text
