"""Backend factories of RL episodes (importable as ``module:function`` for worker processes).

* ``official_backend``: the registered driver of the task at an official initial state
  (``BackendRequest.init_state``) — the harness's default backend;
* ``wide_layout_backend``: a wide-layout random start from ``BackendRequest.seed``, with
  light, camera-pose and material randomisation where the driver offers it (LIBERO:
  ``random_layout``, ``randomize_lighting``, ``randomize_camera_pose``,
  ``randomize_materials``; the tabletop lays out its objects from the seed).

Both register the primitive providers the harness registers (perception, measurement).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from captain_backends.core.libero.variants import WIDE_LAYOUT_OPTIONS
from captain_backends.core.registry import driver_class
from captain_harness.core.episode.backend import Backend, BackendRequest, default_backend, driver_for_task
from captain_harness.core.episode.errors import EpisodeError

__all__ = ["WIDE_LAYOUT_OPTIONS", "factory_for", "official_backend", "wide_layout_backend"]


def official_backend(request: BackendRequest) -> Backend:
    """The default backend: official initial state (or the driver's default), motion and
    every registered primitive provider (perception, measurement)."""
    return default_backend(request)


def wide_layout_backend(request: BackendRequest) -> Backend:
    """A seeded wide-layout start with appearance randomisation (see the module docstring).

    Raises:
        EpisodeError: the request has no seed (every episode would replay the driver's
            default layout); ``captain rollout --seeds A-B`` gives one per episode.
    """
    if request.seed is None:
        raise EpisodeError(f"{request.task}: a wide-layout start is drawn from the request's seed and this "
                           "request has none; give seeds (captain rollout|eval run --layout wide --seeds 0-9)")
    name, _ = driver_for_task(request.task)
    overrides: dict[str, Any] = {}
    if "random_layout" in driver_class(name).config_keys():
        # a driver with seeded wide layouts (LIBERO): the official state the layout
        # starts from is drawn from the seed
        overrides = {**WIDE_LAYOUT_OPTIONS, "init_state": 0}
    return default_backend(replace(request, init_state=-1), driver_options=overrides)


def factory_for(wide_layout: bool) -> str:
    """The ``module:function`` reference of the factory for a start state."""
    return f"{__name__}:{'wide_layout_backend' if wide_layout else 'official_backend'}"
