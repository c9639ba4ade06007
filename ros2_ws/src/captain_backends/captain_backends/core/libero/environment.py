"""Construction of the LIBERO environment for one task, and official-state loading.

The environment is LIBERO's own ``ControlEnv`` (robosuite 1.4 underneath) built once
per task, without robosuite's renderer, camera observations or hard resets: the driver
steps the MuJoCo model and data directly and renders with ``mujoco.Renderer``.

Construction samples the fixture placement (LIBERO places fixtures such as cabinets and
stoves within their BDDL regions, +-1 cm) from NumPy's global generator; it is seeded
here and the caller's generator state is restored afterwards, so a given seed always
gives the same scene.
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

import numpy as np

from captain_backends.core.libero.catalogue import LiberoTask
from captain_backends.core.libero.errors import LiberoError

os.environ.setdefault("MUJOCO_GL", "egl")


def build_env(task: LiberoTask, seed: int = 0) -> Any:
    """LIBERO's ``ControlEnv`` for ``task`` (slow: seconds). Keyword choices: no
    robosuite renderer, no camera observations, soft resets, 20 Hz nominal control."""
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        with contextlib.redirect_stdout(io.StringIO()):
            from libero.libero.envs.env_wrapper import ControlEnv

            return ControlEnv(
                bddl_file_name=str(task.bddl_file),
                has_renderer=False,
                has_offscreen_renderer=False,
                use_camera_obs=False,
                hard_reset=False,
                camera_names=[],
            )
    except LiberoError:
        raise
    except Exception as exc:  # LIBERO/robosuite raise assorted types while building
        raise LiberoError(f"building the LIBERO environment of {task.task_id} failed: {exc}") from exc
    finally:
        np.random.set_state(state)


def apply_flat_state(model: Any, data: Any, state: np.ndarray) -> None:
    """Load a flattened MuJoCo state ``[time, qpos, qvel]`` (LIBERO's init-state format)
    after clearing every other field of ``data``; time restarts at 0.

    Raises:
        LiberoError: the state does not fit the model (wrong task or suite).
    """
    import mujoco

    expected = 1 + model.nq + model.nv
    if state.shape != (expected,):
        raise LiberoError(
            f"initial state has {state.shape[0]} values but this task's model needs {expected} "
            f"(1 + nq={model.nq} + nv={model.nv}); the state belongs to another task"
        )
    mujoco.mj_resetData(model, data)
    data.qpos[:] = state[1:1 + model.nq]
    data.qvel[:] = state[1 + model.nq:]
    data.time = 0.0
    mujoco.mj_forward(model, data)
