"""Which starts a batch of episodes runs: driver options, layouts and seeds.

``captain rollout`` and ``captain eval run`` share these:

* ``--driver-option key=value`` (repeatable): options of the driver's typed config,
  laid over those the task and the layout set. Values are read as JSON when they parse
  (``true``, ``0.2``, ``3``), else as text. ``check_driver_options`` refuses an unknown
  key (listing the valid ones) or a bad value before any episode runs.
* ``--layout``: ``official`` (the suite's official initial states, ``--states``);
  ``wide`` (seeded random re-placement of the objects with lighting, camera-pose and
  material randomisation, one start per ``--seeds`` value); ``pro_swap`` (LIBERO-PRO's
  position-swapped variant of the suite, ``<suite>_swap``); ``pro_shift`` (every
  LIBERO-PRO shifted-position variant of the suite the installed package ships,
  ``<suite>_temp_x0.1`` ...; ``pro_shift:x0.3`` picks one). The LIBERO-PRO layouts
  run the variant's official states, or wide re-placements of it with ``--seeds``.
* ``--seeds A-B``: randomized starts, one episode per seed (instead of ``--states``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from captain_harness.core.episode.errors import EpisodeError

#: The layouts ``--layout`` accepts (``pro_shift`` also as ``pro_shift:<variant>``).
LAYOUTS: tuple[str, ...] = ("official", "wide", "pro_swap", "pro_shift")


def parse_driver_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``["seed=3", "randomize_lighting=true", "task=x"]`` -> ``{"seed": 3, ...}``.

    Raises:
        EpisodeError: an item without ``=`` or with an empty key.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = str(pair).partition("=")
        key = key.strip()
        if not sep or not key:
            raise EpisodeError(f"--driver-option {pair!r} must look like key=value, e.g. settle_s=0.3")
        try:
            options[key] = json.loads(raw)
        except json.JSONDecodeError:
            options[key] = raw
    return options


def check_driver_options(task: str, options: Mapping[str, Any]) -> None:
    """Refuse options the driver of ``task`` does not take, or values its typed config
    rejects (type, range), before an episode is started.

    Raises:
        EpisodeError: naming the option and listing the driver's valid ones.
    """
    if not options:
        return
    from captain_backends.core.registry import driver_class
    from captain_harness.core.episode.backend import driver_for_task

    name, task_options = driver_for_task(task)
    cls = driver_class(name)
    valid = cls.config_keys()
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise EpisodeError(f"driver {name!r} has no option {', '.join(map(repr, unknown))}; "
                           f"valid options: {', '.join(valid)}")
    config_type = getattr(cls, "config_type", None)
    build = getattr(config_type, "from_options", None)
    if build is None:
        return
    try:
        build(**{**task_options, **options})
    except Exception as exc:  # the config's own precise message (type, range)
        raise EpisodeError(f"driver {name!r}: {exc}") from exc


@dataclass
class StartPlan:
    """The episodes of a batch: tasks x (official states or seeds), with driver options.

    Attributes:
        tasks: ``"<suite>/<task>"`` ids (for LIBERO-PRO layouts: of the variant suites).
        states: official initial states (``[-1]`` with seeds).
        seeds: layout seeds (None: official states).
        driver_options: options every episode's driver gets (layout flags and the user's).
        layout: the layout name as given.
    """

    tasks: list[str]
    states: list[int]
    seeds: list[int] | None = None
    driver_options: dict[str, Any] = field(default_factory=dict)
    layout: str = "official"

    @property
    def episodes(self) -> int:
        """Episodes in one pass over the grid."""
        return len(self.tasks) * (len(self.seeds) if self.seeds is not None else max(1, len(self.states)))


def _random_layout_options(task: str) -> dict[str, Any]:
    """The driver options of a wide random start for ``task`` (LIBERO: re-placement and
    appearance randomisation; drivers that lay out their scene from the seed: none)."""
    from captain_backends.core.registry import driver_class
    from captain_harness.core.episode.backend import driver_for_task

    name, _ = driver_for_task(task)
    if "random_layout" not in driver_class(name).config_keys():
        return {}
    from captain_backends.core.libero.variants import WIDE_LAYOUT_OPTIONS

    return dict(WIDE_LAYOUT_OPTIONS)


def variant_suites(suite: str, layout: str) -> list[str]:
    """The suites a layout runs for ``suite`` (the suite itself for official and wide).

    Raises:
        EpisodeError: unknown layout, or a LIBERO-PRO variant the package does not ship.
    """
    kind, _, which = layout.partition(":")
    if kind not in LAYOUTS or (which and kind != "pro_shift"):
        raise EpisodeError(f"unknown layout {layout!r}; layouts: {', '.join(LAYOUTS)} "
                           "(pro_shift:<variant> picks one shift, e.g. pro_shift:x0.3)")
    if kind in ("official", "wide"):
        return [suite]
    from captain_backends.core.libero.errors import LiberoError
    from captain_backends.core.libero.variants import pro_variant_suites

    try:
        return list(pro_variant_suites(suite, kind, which or None))
    except LiberoError as exc:
        raise EpisodeError(str(exc)) from exc


def plan_starts(suite: str, tasks: str | None, states: str, *, layout: str = "official",
                seeds: str | None = None, driver_options: Mapping[str, Any] | None = None) -> StartPlan:
    """The episodes of ``--suite/--tasks/--states/--layout/--seeds/--driver-option``.

    Raises:
        EpisodeError: unknown layout or suite variant, ``wide`` without seeds, an empty
            range, or a driver option the driver refuses.
    """
    from captain_harness.core.episode.runner import parse_range, suite_tasks

    suites = variant_suites(suite, layout)
    seed_list: list[int] | None = None
    if seeds is not None:
        try:
            seed_list = parse_range(seeds)
        except ValueError as exc:
            raise EpisodeError(f"--seeds {seeds!r} is not a range like 0-9 or 1,4,7") from exc
        if not seed_list or any(s < 0 for s in seed_list):
            raise EpisodeError(f"--seeds {seeds!r} must name seeds >= 0, e.g. 0-9")
    elif layout == "wide":
        raise EpisodeError("--layout wide draws one random start per seed: give --seeds, e.g. --seeds 0-9")
    try:
        state_list = [-1] if seed_list is not None else parse_range(states)
        task_list = [t for s in suites for t in suite_tasks(s, tasks)]
    except ValueError as exc:
        raise EpisodeError(str(exc)) from exc
    if not state_list:
        raise EpisodeError(f"no initial states in {states!r}; give e.g. 11-16")
    from captain_backends.core.errors import BackendError

    reserved = {"task": "--suite/--tasks", "init_state": "--states", "seed": "--seeds"}
    clash = [f"{k} (use {reserved[k]})" for k in (driver_options or {}) if k in reserved]
    if clash:
        raise EpisodeError(f"--driver-option cannot set {', '.join(clash)}: each episode sets it")
    try:
        options: dict[str, Any] = _random_layout_options(task_list[0]) if seed_list is not None else {}
        options.update(driver_options or {})
        for task in _one_per_suite(task_list):
            check_driver_options(task, options)
    except BackendError as exc:  # no driver for the suite
        raise EpisodeError(str(exc)) from exc
    return StartPlan(task_list, state_list, seed_list, options, layout)


def _one_per_suite(tasks: Sequence[str]) -> list[str]:
    seen: dict[str, str] = {}
    for task in tasks:
        seen.setdefault(task.partition("/")[0], task)
    return list(seen.values())
