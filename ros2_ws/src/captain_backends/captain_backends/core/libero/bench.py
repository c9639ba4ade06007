"""Speed of the LIBERO backend (a benchmark, not a test): for ``captain bench backends``.

Figures (wall clock on this machine, one process, one core busy):

* ``libero_configure_s``: building the task's LIBERO environment, renderer and robot files;
* ``libero_step_ms``: one control period (``send_command`` + ``advance``, 5 physics
  substeps with contact reading) while the arm follows a smooth joint trajectory;
* ``libero_realtime_factor``: simulated time over wall time for those steps;
* ``libero_render_ms``: one ``capture()`` of both cameras, RGB-D at the configured size;
* ``libero_reset_ms``: one reset to an official initial state (including the 0.5 s settle);
* ``libero_wide_reset_ms``: one seeded wide-layout random reset;
* ``libero_step_cpu_ms`` / ``libero_render_cpu_ms``: the same as CPU time of this
  process (all threads, the renderer's included): on a shared machine these show the
  cost, the wall-clock figures show what this process got.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from captain_backends.core.driver import JointCommand


def libero_figures(task: str = "libero_spatial/0", steps: int = 300, renders: int = 10, resets: int = 5,
                   **driver_options: Any) -> dict[str, float]:
    """Measure the LIBERO driver on one task.

    Args:
        task: task id to load.
        steps: control periods timed.
        renders: two-camera captures timed.
        resets: resets of each kind timed.
        driver_options: further ``LiberoDriver`` options (e.g. ``camera_width_px``).
    """
    from captain_backends.core.libero.driver import LiberoDriver

    t0 = time.perf_counter()
    driver = LiberoDriver(task=task, init_state=0, random_layout=True, **driver_options)
    driver.configure()
    configure_s = time.perf_counter() - t0
    try:
        driver.activate()
        driver.reset(init_state=0)
        q0 = driver.read_state().joint_positions_rad
        amplitude = np.array([0.2, 0.1, 0.15, 0.15, 0.2, 0.2, 0.3])
        period_s = driver.control_period_s
        t0, c0 = time.perf_counter(), time.process_time()
        for k in range(steps):
            phase = np.sin(2.0 * np.pi * 0.25 * k * period_s)
            driver.send_command(JointCommand(q0 + amplitude * phase, 1.0))
            driver.advance()
        step_s = (time.perf_counter() - t0) / max(steps, 1)
        step_cpu_s = (time.process_time() - c0) / max(steps, 1)

        driver.capture()  # the first capture uploads textures
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(renders):
            driver.capture()
        render_s = (time.perf_counter() - t0) / max(renders, 1)
        render_cpu_s = (time.process_time() - c0) / max(renders, 1)

        t0 = time.perf_counter()
        for k in range(resets):
            driver.reset(init_state=k % 50)
        reset_s = (time.perf_counter() - t0) / max(resets, 1)

        t0 = time.perf_counter()
        for k in range(resets):
            driver.reset(seed=1000 + k)
        wide_reset_s = (time.perf_counter() - t0) / max(resets, 1)
    finally:
        driver.shutdown()
    return {
        "libero_configure_s": configure_s,
        "libero_step_ms": 1000.0 * step_s,
        "libero_realtime_factor": period_s / step_s if step_s > 0 else float("inf"),
        "libero_render_ms": 1000.0 * render_s,
        "libero_reset_ms": 1000.0 * reset_s,
        "libero_wide_reset_ms": 1000.0 * wide_reset_s,
        "libero_step_cpu_ms": 1000.0 * step_cpu_s,
        "libero_render_cpu_ms": 1000.0 * render_cpu_s,
    }


#: The name the benchmark runner looks for.
run = libero_figures
