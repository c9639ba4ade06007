"""Wide-layout starts drawn until one builds, and the record of what a start perturbs.

``draw_wide_start`` picks a non-held-out official state from the seed, lets it come to
rest, and re-places the objects (``layout.py``). Some official states are not at rest
when they are loaded: in LIBERO's own data, objects of ``libero_10/0``, ``/1`` and
``/7`` start a few centimetres inside the floor and are thrown up to 60 cm high, and
the black bowl of ``libero_spatial/5`` starts above its ramekin and slides off it; they
land after about one second. Sampling a layout after a fixed 0.3 s took those objects
in mid-air as their resting height, so every placement "dropped" and these four tasks
never built a wide layout. The state is now settled until every movable object is at
rest (``REST_SPEED_M_S``, at most ``MAX_SETTLE_S``). When a drawn state still gives no
layout within ``layout_attempts``, another state is drawn (up to ``MAX_REDRAWS``); the
redraws are counted in the record, never hidden.

``perturbation_record`` states, for the episode's records, everything the start changed
relative to the official task: the seed, the layout and the official state it started
from, each object moved (metres, radians), the appearance draws, and for LIBERO-PRO
suites the variant and the objects whose BDDL initial region it moved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import captain_backends.core.libero.catalogue as catalogue
from captain_backends.core.libero.environment import apply_flat_state
from captain_backends.core.libero.errors import LayoutError, LiberoError
from captain_backends.core.libero.variants import region_displacements, variant_of

#: An object moving slower than this is at rest, m/s.
REST_SPEED_M_S = 0.01
#: Longest settling of an official state before a layout is sampled, s.
MAX_SETTLE_S = 3.0
#: Official states drawn after the first when one gives no layout.
MAX_REDRAWS = 8


def settle_until_at_rest(hold: Callable[[float], None], speed: Callable[[], float], min_s: float,
                         max_s: float = MAX_SETTLE_S, step_s: float = 0.1) -> float:
    """Run ``hold`` for at least ``min_s`` and then until ``speed()`` is below
    ``REST_SPEED_M_S`` (at most ``max_s``); returns the seconds run."""
    elapsed = 0.0
    if min_s > 0.0:
        hold(min_s)
        elapsed = min_s
    while elapsed < max_s and speed() > REST_SPEED_M_S:
        hold(step_s)
        elapsed += step_s
    return round(elapsed, 3)


def draw_wide_start(scene: Any, rng: np.random.Generator, hold: Callable[[float], None], settle_s: float,
                    attempts: int) -> dict[str, Any]:
    """Put a wide-layout start into ``scene.data``: a seeded official state (never a
    held-out one), settled, with its objects re-placed. Returns the layout summary plus
    ``base_init_state``, ``redraws`` and ``failed_base_states``.

    Raises:
        LayoutError: no state among the drawn ones gives a layout.
    """
    candidates = list(catalogue.training_init_states(scene.task))
    failed: list[int] = []
    last: LayoutError | None = None
    for _ in range(min(MAX_REDRAWS + 1, len(candidates))):
        base = int(rng.choice([c for c in candidates if c not in failed]))
        apply_flat_state(scene.model, scene.data, catalogue.init_state(scene.task, base))
        settled = settle_until_at_rest(hold, scene.layout.max_object_speed, settle_s)
        try:
            summary = scene.layout.sample(rng, hold, attempts)
        except LayoutError as exc:
            failed.append(base)
            last = exc
            continue
        return {**summary, "base_init_state": base, "redraws": len(failed), "failed_base_states": failed,
                "settled_s": settled}
    raise LayoutError(f"{scene.task.task_id}: no wide layout from official states {failed}: {last}")


def perturbation_record(task: Any, seed: int, layout: str, init_state: int, appearance: dict[str, Any],
                        wide: dict[str, Any] | None = None) -> tuple[list[str], dict[str, Any]]:
    """``(perturb_axes, perturbation)`` of one start (see the module docstring).

    ``perturb_axes`` names the axes in the data card's words: ``object_layout`` (wide
    re-placement), ``lighting``, ``camera_view``, ``object_attributes`` (material tints),
    ``object_position_swap`` / ``object_position_shift`` (LIBERO-PRO).
    """
    axes: list[str] = []
    record: dict[str, Any] = {"seed": int(seed), "layout": layout}
    if wide is not None:
        axes.append("object_layout")
        record.update(base_init_state=wide["base_init_state"], moved_objects=wide.get("displacements", {}),
                      layout_attempts=wide.get("attempts", 0), layout_redraws=wide["redraws"],
                      failed_base_states=wide["failed_base_states"], settled_s=wide.get("settled_s"))
    else:
        record["init_state"] = int(init_state)
    if appearance:
        axes += [axis for key, axis in (("light_scale", "lighting"), ("camera_shift_m", "camera_view"),
                                        ("materials_tinted", "object_attributes")) if key in appearance]
        record["appearance"] = appearance
    variant = variant_of(task.suite)
    if variant is not None:
        base_suite, kind = variant
        axes.append("object_position_swap" if kind == "swap" else "object_position_shift")
        record.update(variant=kind, base_suite=base_suite)
        try:
            base_task = catalogue.get_task(f"{base_suite}/{task.index}")
        except LiberoError:
            base_task = None
        if base_task is not None and base_task.name == task.name:
            record["region_moves"] = region_displacements(base_task.bddl_file, task.bddl_file)
    return axes, record
