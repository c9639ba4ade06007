"""The task's BDDL goal predicates, evaluated with LIBERO's own predicate code.

``env.parsed_problem["goal_state"]`` lists the goal as a conjunction of predicates such
as ``["on", "akita_black_bowl_1", "plate_1"]`` or ``["open",
"wooden_cabinet_1_top_region"]``. Each predicate is evaluated with the LIBERO domain's
``_eval_predicate`` -- the very function its ``_check_success`` folds over -- so the
per-goal flags and LIBERO's success always agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from captain_backends.core.snapshot import GoalPredicate

#: Predicates on articulated parts (doors, drawers, knobs).
JOINT_PREDICATES = frozenset({"open", "close", "turnon", "turnoff"})
#: Relational predicates decided by contact and containment.
CONTACT_PREDICATES = frozenset({"on", "in", "stack", "incontact"})
_DISPLAY = {"on": "On", "in": "In", "open": "Open", "close": "Close", "turnon": "TurnOn",
            "turnoff": "TurnOff", "up": "Up", "stack": "Stack", "incontact": "InContact"}


def goal_terms(domain: Any) -> tuple[tuple[str, ...], ...]:
    """The goal predicates as tuples ``(predicate, arg, ...)``, lower-case predicate."""
    terms = domain.parsed_problem["goal_state"]
    return tuple((str(term[0]).lower(), *map(str, term[1:])) for term in terms)


def goal_text(term: tuple[str, ...]) -> str:
    """Human-readable form, e.g. ``On(akita_black_bowl_1, plate_1)``."""
    name = _DISPLAY.get(term[0], term[0].capitalize())
    return f"{name}({', '.join(term[1:])})"


def evaluate_goals(domain: Any) -> tuple[GoalPredicate, ...]:
    """Every goal predicate with LIBERO's verdict on the current simulator state."""
    return tuple(
        GoalPredicate(
            predicate=term[0],
            args=tuple(term[1:]),
            satisfied=bool(domain._eval_predicate(list(term))),
            involves_joint=term[0] in JOINT_PREDICATES,
            involves_contact=term[0] in CONTACT_PREDICATES,
        )
        for term in goal_terms(domain)
    )


#: LIBERO articulation ranges (``object_properties["articulation"]``) that satisfy each
#: joint predicate.
_RANGE_KEYS = {"open": "default_open_ranges", "close": "default_close_ranges",
               "turnon": "default_turnon_ranges", "turnoff": "default_turnoff_ranges"}


def _goal_joints(domain: Any, name: str) -> tuple[list[str], Any]:
    """The joints a BDDL entity's articulation predicates read, and the object that
    owns their ranges (LIBERO's own lookup: a region site's joints and its parent object,
    or an object's joints and the object)."""
    site = getattr(domain, "object_sites_dict", {}).get(name)
    if site is not None:
        states = getattr(domain, "object_states_dict", {})
        parent = getattr(states.get(name), "parent_name", None)
        return list(getattr(site, "joints", []) or []), domain.get_object(parent) if parent else None
    obj = domain.get_object(name) if hasattr(domain, "get_object") else None
    return list(getattr(obj, "joints", []) or []), obj


def joint_goal_positions(domain: Any, goals: tuple[GoalPredicate, ...]) -> dict[str, float]:
    """Joint position (rad or m) that satisfies each joint predicate of the goal, by joint
    name: the middle of the range LIBERO's ``is_open`` / ``is_close`` / ``turn_on`` /
    ``turn_off`` accept for that joint's object (e.g. a drawer's ``[-0.16, -0.14]`` m
    open range gives -0.15). Goals whose object declares no range are left out."""
    out: dict[str, float] = {}
    for goal in goals:
        key = _RANGE_KEYS.get(goal.predicate)
        if key is None or not goal.args:
            continue
        joints, owner = _goal_joints(domain, goal.args[0])
        ranges = (getattr(owner, "object_properties", None) or {}).get("articulation", {}).get(key) or []
        if len(ranges) < 2:
            continue
        value = 0.5 * (float(min(ranges)) + float(max(ranges)))
        for joint in joints:
            out[str(joint)] = value
    return out


def active_goal(goals: tuple[GoalPredicate, ...]) -> GoalPredicate | None:
    """The first unsatisfied goal; the last goal when all hold; None without goals."""
    for goal in goals:
        if not goal.satisfied:
            return goal
    return goals[-1] if goals else None


def entity_position(domain: Any, name: str) -> np.ndarray | None:
    """World position of a BDDL entity: an object's or fixture's root body, or a region
    site, metres; None when the name is unknown."""
    sim = domain.sim
    if name in domain.object_sites_dict:
        return np.array(sim.data.get_site_xpos(name), dtype=float)
    if name in getattr(domain, "obj_body_id", {}):
        return np.array(sim.data.body_xpos[domain.obj_body_id[name]], dtype=float)
    return None


def goal_roles(domain: Any, goal: GoalPredicate | None) -> tuple[str, str, tuple[float, float, float] | None]:
    """``(target_object, destination, goal_position_m)`` of a goal: for a relation the
    moved object, its destination and the destination's position; for a predicate on
    an articulated part the part (no destination) and its position."""
    if goal is None or not goal.args:
        return "", "", None
    target = goal.args[0]
    destination = goal.args[1] if len(goal.args) > 1 else ""
    position = entity_position(domain, destination or target)
    return target, destination, (tuple(float(v) for v in position) if position is not None else None)


def table_regions(domain: Any, T_base_world: np.ndarray) -> dict[str, dict[str, Any]]:
    """The goal's regions of the table (sites whose parent is the table or floor, not an
    object or fixture: ``main_table_stove_front_region``), as rectangles in the robot base
    frame: ``{name: {"center_xy_m": [x, y], "half_xy_m": [hx, hy], "yaw_rad": a}}``, m and
    rad, rounded to the millimetre.

    LIBERO counts an object ``On`` such a region when its origin lies within the site's
    half sizes (x, y) and rests on the table; nothing marks the region in the images, so
    the task states it (``TaskInfo.extra["table_regions"]``). Part of the task's
    definition, not simulator state: the table does not move."""
    out: dict[str, dict[str, Any]] = {}
    states = getattr(domain, "object_states_dict", {})
    sites = getattr(domain, "object_sites_dict", {})
    bodies = set(getattr(domain, "objects_dict", {})) | set(getattr(domain, "fixtures_dict", {}))
    for term in goal_terms(domain):
        for name in term[1:]:
            state, site = states.get(name), sites.get(name)
            if site is None or state is None or getattr(state, "parent_name", None) in bodies or name in out:
                continue
            xpos = np.asarray(domain.sim.data.get_site_xpos(name), dtype=float)
            xmat = np.asarray(domain.sim.data.get_site_xmat(name), dtype=float).reshape(3, 3)
            center = T_base_world[:3, :3] @ xpos + T_base_world[:3, 3]
            axis = T_base_world[:3, :3] @ xmat[:, 0]
            half = np.asarray(site.size, dtype=float)[:2]
            out[name] = {"center_xy_m": [round(float(v), 3) for v in center[:2]],
                         "half_xy_m": [round(float(v), 3) for v in half],
                         "yaw_rad": round(float(np.arctan2(axis[1], axis[0])), 3)}
    return out


def goal_entities(domain: Any, entity_names: Sequence[str]) -> list[str]:
    """The scene entities (of ``entity_names``) the goal names: each argument that is an
    entity, or the entity a region site belongs to (its ``parent_name`` in LIBERO's object
    states: ``basket_1_contain_region`` -> ``basket_1``), in order, once each."""
    states = getattr(domain, "object_states_dict", {})
    entities = set(entity_names)
    out: list[str] = []
    for term in goal_terms(domain):
        for arg in term[1:]:
            owner = arg if arg in entities else getattr(states.get(arg), "parent_name", None)
            if owner in entities and owner not in out:
                out.append(owner)
    return out
