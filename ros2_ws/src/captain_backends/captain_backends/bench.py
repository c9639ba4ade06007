"""`captain bench backends`: env step, render and reset times per backend.

Every backend is measured through the driver interface only, by the same code
(``measure_driver``):

* ``<backend>_step_ms``: one control cycle as the harness runs it — ``send_command``
  (a slowly moving joint target), ``advance`` (one 10 ms control period with a force
  guard, i.e. all physics substeps) and ``read_state``; median over ``steps`` cycles.
* ``<backend>_realtime_factor``: control period / step time (how much faster than
  real time the backend runs a control loop on one core).
* ``<backend>_step_cpu_ms`` / ``<backend>_render_cpu_ms``: the same in CPU time of
  the process (stable when other processes load the machine; rendering on llvmpipe
  spreads over several threads, so its CPU time can exceed its wall time).
* ``<backend>_render_ms``: ``capture()`` of both cameras (RGB + metric depth, 512x512).
* ``<backend>_reset_ms``: ``reset(seed)`` including the backend's settling.
* ``<backend>_configure_s``: building the backend (model generation, compilation).

The tabletop also reports the raw MuJoCo step of its scene as a same-process baseline
(``tabletop_physics_substep_us``) and the cost of everything Python adds per control
period on top of it (``tabletop_control_overhead_ratio``).

Options (``captain bench backends -o key=value``): ``backends`` (comma-separated, default
all sections), ``steps`` (default 300), ``renders`` (default 10), ``resets`` (default 5).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

from captain_backends.core.driver import ForceGuard, JointCommand, RobotDriver, SimulatedDriver


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return 1e3 * statistics.median(samples)


def _cpu_ms(fn: Callable[[], object], repeats: int) -> float:
    """Mean CPU time of this process per call (all its threads), ms: unlike wall time,
    it does not grow when other processes compete for the cores."""
    started = time.process_time()
    for _ in range(repeats):
        fn()
    return 1e3 * (time.process_time() - started) / repeats


def measure_driver(driver: RobotDriver, prefix: str, steps: int = 300, renders: int = 10,
                   resets: int = 5) -> dict[str, float]:
    """Step, render and reset figures of a configured driver (left ACTIVE).

    The commanded motion is a 0.1 rad, 0.5 Hz sine on every joint around the current
    position (well inside the velocity limits), streamed once per control period.
    """
    from captain_backends.core.driver import LifecycleState

    if driver.lifecycle_state is LifecycleState.INACTIVE:
        driver.activate()
    q0 = np.asarray(driver.read_state().joint_positions_rad, dtype=float)
    period = driver.control_period_s
    guard = ForceGuard(max_contact_force_n=1e6)
    tick = [0]

    def step() -> None:
        t = tick[0] * period
        tick[0] += 1
        driver.send_command(JointCommand(q0 + 0.1 * np.sin(2 * np.pi * 0.5 * t), 1.0))
        driver.advance(guard)
        driver.read_state()

    for _ in range(min(20, steps)):
        step()  # warm-up
    step_ms = _median_ms(step, steps)
    figures = {f"{prefix}_step_ms": step_ms, f"{prefix}_realtime_factor": 1e3 * period / step_ms,
               f"{prefix}_step_cpu_ms": _cpu_ms(step, steps)}
    if renders > 0:
        driver.capture()  # first capture creates the GL context
        figures[f"{prefix}_render_ms"] = _median_ms(driver.capture, renders)
        figures[f"{prefix}_render_cpu_ms"] = _cpu_ms(driver.capture, renders)
    if resets > 0 and isinstance(driver, SimulatedDriver):
        seeds = iter(range(1000, 1000 + resets))
        figures[f"{prefix}_reset_ms"] = _median_ms(lambda: driver.reset(seed=next(seeds)), resets)
    return figures


def _configured(make: Callable[[], RobotDriver]) -> tuple[RobotDriver, float]:
    started = time.perf_counter()
    driver = make()
    driver.configure()
    return driver, time.perf_counter() - started


# ---------------------------------------------------------------------- sections
def _mock_figures(steps: int, renders: int, resets: int) -> dict[str, float]:
    from captain_backends.core.mock import MockDriver

    driver, configure_s = _configured(MockDriver)
    try:
        figures = measure_driver(driver, "mock", steps, renders, resets)
    finally:
        driver.shutdown()
    figures["mock_configure_s"] = configure_s
    return figures


def _tabletop_figures(steps: int, renders: int, resets: int) -> dict[str, float]:
    import mujoco

    from captain_backends.core.tabletop.driver import TabletopDriver

    driver, configure_s = _configured(lambda: TabletopDriver(seed=0))
    try:
        figures = measure_driver(driver, "tabletop", steps, renders, resets)
        # Same-process baseline: the bare physics of one control period of the same
        # scene from the same state (no Python control, no contact reads), restored
        # before every repeat so the uncontrolled arm cannot drift into other contacts.
        model, start = driver.mj_model, driver.mj_data
        data = mujoco.MjData(model)
        samples = []
        for _ in range(max(20, steps)):
            mujoco.mj_copyData(data, model, start)
            started = time.perf_counter()
            for _ in range(driver.substeps):
                mujoco.mj_step(model, data)
            samples.append(time.perf_counter() - started)
        substep_us = 1e6 * statistics.median(samples) / driver.substeps
        figures["tabletop_physics_substep_us"] = substep_us
        figures["tabletop_physics_realtime_factor"] = 1e6 * model.opt.timestep / substep_us
        figures["tabletop_control_overhead_ratio"] = (
            figures["tabletop_step_ms"] / (1e-3 * substep_us * driver.substeps))
    finally:
        driver.shutdown()
    figures["tabletop_configure_s"] = configure_s
    return figures


#: Benchmark sections by backend name; each returns ``<name>_...`` figures.
def _libero_figures(steps: int, renders: int, resets: int) -> dict[str, float]:
    from captain_backends.core.libero.bench import libero_figures

    return libero_figures(steps=steps, renders=renders, resets=resets)


SECTIONS: dict[str, Callable[[int, int, int], dict[str, float]]] = {
    "mock": _mock_figures,
    "tabletop": _tabletop_figures,
    "libero": _libero_figures,
}


def run(backends: str | None = None, steps: int = 300, renders: int = 10, resets: int = 5
        ) -> dict[str, float]:
    """Figures of the selected backends (all sections when ``backends`` is None).

    Args:
        backends: comma-separated section names, e.g. ``"tabletop,mock"``.
        steps: control cycles timed per backend.
        renders: two-camera captures timed per backend.
        resets: resets timed per backend.

    Raises:
        ValueError: for an unknown section name (lists the valid ones).
    """
    names = list(SECTIONS) if backends is None else [n.strip() for n in str(backends).split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown backend section(s) {unknown}; valid: {', '.join(SECTIONS)}")
    figures: dict[str, float] = {}
    for name in names:
        section = SECTIONS[name](int(steps), int(renders), int(resets))
        figures.update({k: float(v) for k, v in section.items()})
    return figures
