"""``captain bench motion``: speed of the motion stack.

Figures (JSON keys):

* ``ik_median_us`` / ``ik_p99_us``: one goal IK solve including its self-collision
  check, for random reachable tabletop poses (top-down within ±90° of yaw and 20° of
  tilt, positions over the table) seeded from the home configuration, restarts on.
* ``ik_waypoint_median_us``: one warm-started waypoint solve of a sweep (1 cm apart).
* ``ik_success_rate``: share of those goal solves that converged collision-free.
* ``self_collision_us``: median time of one self-collision check (collision-free
  random configurations, convex hulls, SRDF pairs removed).
* ``plan_ms``: planning and checking a 0.2 m sweep (IK at every waypoint, limits,
  jumps, self-collision, timing).
* ``sweep_realtime_factor``: simulated time / wall time of whole ``move_to`` calls in the
  MuJoCo tabletop on one core (0.2 m horizontal sweeps and a guarded descent onto the
  table); ``sweep_realtime_factor_cpu``: the same against this thread's CPU time (what
  the core delivers when other processes share the machine).
* ``call_overhead_ms``: per ``move_to`` call (a 0.2 m sweep, 2.25 s simulated), wall
  time beyond the driver's methods (physics, command and state I/O): planning,
  checks, streaming bookkeeping, the result; minimum over identical calls
  (``call_overhead_median_ms``: their median).
* ``call_overhead_with_driver_io_ms``: the same including the driver's
  ``send_command`` / ``read_state`` time (everything beyond physics itself).
* ``call_overhead_self_timed_ms`` (``call_overhead_self_timed_median_ms``): the same
  calls' wall time beyond the driver time the harness measures itself (the result's
  ``physics_wall_s`` and ``driver_io_wall_s`` diagnostics), so without the cost of this
  bench's timing wrappers around the driver methods (one Python call each per control
  period, more than a microsecond each right after physics); the state read before
  planning counts as harness time here.
* ``stream_overhead_us_per_period``: the streaming loop's own time per control period.

Run with ``python -m captain_harness.bench_motion`` or through ``captain bench motion``.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np


def _quantiles_us(samples_s: list[float]) -> tuple[float, float]:
    arr = np.asarray(samples_s) * 1e6
    return float(np.median(arr)), float(np.percentile(arr, 99))


def _random_targets(n: int, seed: int) -> list[np.ndarray]:
    from captain_harness.core.geometry import pose_matrix, quat_multiply, rotation_about_axis

    rng = np.random.default_rng(seed)
    down = np.array([0.0, 2**-0.5, 2**-0.5, 0.0])
    out = []
    for _ in range(n):
        p = rng.uniform([0.3, -0.3, -0.08], [0.7, 0.3, 0.35])
        q = quat_multiply(rotation_about_axis([0, 0, 1], rng.uniform(-math.pi / 2, math.pi / 2)), down)
        axis = np.append(rng.normal(size=2), 0.0)
        q = quat_multiply(rotation_about_axis(axis, rng.uniform(0.0, math.radians(20))), q)
        out.append(pose_matrix(p, q))
    return out


def bench_kinematics(description: Any, n_ik: int = 300, seed: int = 0) -> dict[str, float]:
    """IK, self-collision and planning timings on a robot description."""
    from captain_harness.core.collision import SelfCollisionChecker
    from captain_harness.core.kinematics import Kinematics
    from captain_harness.core.motion_config import MotionConfig
    from captain_harness.core.sweep import plan_sweep

    cfg = MotionConfig()
    kin = Kinematics(description)
    col = SelfCollisionChecker(kin)
    rng = np.random.default_rng(seed)
    home = kin.home_rad

    def valid(q: np.ndarray) -> bool:
        return not col.in_collision(q)

    targets = _random_targets(n_ik, seed)
    times, ok = [], 0
    perf = time.perf_counter
    for T in targets:
        t0 = perf()
        res = kin.solve_ik(
            T, home, max_iterations=cfg.ik_max_iterations, restarts=cfg.ik_restarts, rng=rng, is_valid=valid
        )
        times.append(perf() - t0)
        ok += res.success
    ik_med, ik_p99 = _quantiles_us(times)

    # warm waypoint solves along 1 cm steps
    warm = []
    q = home.copy()
    T = kin.fk(q)
    for _ in range(n_ik):
        T_next = T.copy()
        T_next[:3, 3] += rng.normal(size=3) * 0.01 / math.sqrt(3)
        t0 = perf()
        res = kin.solve_ik(
            T_next,
            q,
            max_iterations=cfg.ik_max_iterations,
            position_tolerance_m=5 * cfg.ik_position_tolerance_m,
            rotation_tolerance_rad=5 * cfg.ik_rotation_tolerance_rad,
        )
        col.in_collision(res.q)
        warm.append(perf() - t0)
        if res.success and np.linalg.norm(T_next[:3, 3] - kin.fk(home)[:3, 3]) < 0.15:
            q, T = res.q, T_next
    warm_med, _ = _quantiles_us(warm)

    free = []
    while len(free) < 500:
        qr = kin.random_configuration(rng)
        if not col.in_collision(qr):
            free.append(qr)
    coll = []
    for qr in free:
        t0 = perf()
        col.in_collision(qr)
        coll.append(perf() - t0)
    coll_med, _ = _quantiles_us(coll)

    start = kin.fk(home)
    plans = []
    for k in range(10):
        goal = start[:3, 3] + np.array([0.0, 0.2 * (-1) ** k, -0.05])
        t0 = perf()
        plan_sweep(kin, col, cfg, home, goal, np.array([0.0, 2**-0.5, 2**-0.5, 0.0]), speed_m_s=0.1)
        plans.append(perf() - t0)
    return {
        "ik_median_us": ik_med,
        "ik_p99_us": ik_p99,
        "ik_success_rate": ok / len(targets),
        "ik_waypoint_median_us": warm_med,
        "self_collision_us": coll_med,
        "self_collision_pairs": float(col.active_pair_count),
        "plan_ms": float(np.median(plans) * 1e3),
    }


class _TimedDriver:
    """Forwards everything to a driver and adds up the wall time spent in ``advance``
    (physics) and in ``send_command`` / ``read_state`` / ``hold`` (I/O).

    The timed methods are closures bound on the instance (no attribute forwarding on
    the hot path) and add into local cells; what they cost outside their own timing
    windows (one Python call each, about 0.1-0.3 µs) still counts as harness time."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        totals = self._totals = [0.0, 0.0]  # physics, I/O
        perf = time.perf_counter
        advance, send_command, read_state, hold = driver.advance, driver.send_command, driver.read_state, driver.hold

        def timed_advance(guard: Any = None) -> Any:
            t0 = perf()
            report = advance(guard)
            totals[0] += perf() - t0
            return report

        def timed_send_command(command: Any) -> Any:
            t0 = perf()
            sent = send_command(command)
            totals[1] += perf() - t0
            return sent

        def timed_read_state() -> Any:
            t0 = perf()
            state = read_state()
            totals[1] += perf() - t0
            return state

        def timed_hold() -> Any:
            t0 = perf()
            sent = hold()
            totals[1] += perf() - t0
            return sent

        self.advance, self.send_command, self.read_state, self.hold = (
            timed_advance,
            timed_send_command,
            timed_read_state,
            timed_hold,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    @property
    def physics_s(self) -> float:
        """Wall time inside ``advance`` so far, s."""
        return self._totals[0]

    @property
    def io_s(self) -> float:
        """Wall time inside ``send_command`` / ``read_state`` / ``hold`` so far, s."""
        return self._totals[1]


def bench_sweeps(sweeps: int = 6, seed: int = 0) -> dict[str, float]:
    """Realtime factor and per-call overhead of ``move_to`` in the MuJoCo tabletop.

    ``sweep_realtime_factor`` is simulated time over wall time of whole calls;
    ``sweep_realtime_factor_cpu`` the same over this thread's CPU time (what one core
    delivers when other processes share the machine). The overhead of a call is its
    wall time minus the time inside the driver's methods; the minimum over identical
    sweeps is reported (least disturbed by other processes), the median beside it.
    """
    from captain_backends.core.tabletop.driver import TabletopDriver
    from captain_harness.core.api import RobotAPI
    from captain_harness.core.motion import MotionPrimitives

    raw = TabletopDriver(task="pick_cube", seed=seed)
    raw.configure()
    raw.activate()
    driver = _TimedDriver(raw)
    try:
        prims = MotionPrimitives(driver)  # type: ignore[arg-type]
        api = RobotAPI()
        prims.register(api)
        q = [0.0, 2**-0.5, 2**-0.5, 0.0]
        table_z = float(raw.task_info().extra["table_top_z_m"])
        sim_s = cpu_s = wall_s = 0.0
        overhead, overhead_io, overhead_self = [], [], []
        calls: list[tuple[tuple, dict]] = []
        for k in range(sweeps):  # 0.2 m horizontal sweeps at 0.1 m/s
            calls.append(((list(np.array([0.45, 0.1 * (-1) ** k, 0.15])), q), {"speed": 0.1}))
        calls.append(((list(np.array([0.35, 0.3, table_z + 0.02])), q), {"speed": 0.1}))
        calls.append(((list(np.array([0.35, 0.3, table_z - 0.05])), q), {"speed": 0.03}))  # guarded descent
        for i, (args, kwargs) in enumerate(calls):
            physics0, io0 = driver.physics_s, driver.io_s
            w0, c0 = time.perf_counter(), time.thread_time()
            out = api.call("move_to", args, kwargs)
            cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
            value = out.result["value"] or {}
            if "duration_s" not in value:
                raise RuntimeError(f"benchmark sweep failed: {out.receipt}")
            physics, io = driver.physics_s - physics0, driver.io_s - io0
            sim_s += float(value["duration_s"])
            cpu_s += cpu
            wall_s += wall
            if 0 < i < sweeps:  # identical 0.2 m sweeps (the first starts elsewhere)
                overhead_io.append(wall - physics)
                overhead.append(wall - physics - io)
                diagnostics = out.result["diagnostics"]
                overhead_self.append(wall - diagnostics["physics_wall_s"] - diagnostics["driver_io_wall_s"])
        return {
            "sweep_realtime_factor": sim_s / wall_s,
            "sweep_realtime_factor_cpu": sim_s / cpu_s,
            "call_overhead_ms": float(np.min(overhead) * 1e3),
            "call_overhead_median_ms": float(np.median(overhead) * 1e3),
            "call_overhead_with_driver_io_ms": float(np.min(overhead_io) * 1e3),
            "call_overhead_self_timed_ms": float(np.min(overhead_self) * 1e3),
            "call_overhead_self_timed_median_ms": float(np.median(overhead_self) * 1e3),
            "stream_overhead_us_per_period": bench_stream_loop(prims),
        }
    finally:
        raw.shutdown()


def bench_stream_loop(prims: Any, periods: int = 500, repeats: int = 5) -> float:
    """Harness time per control period of the streaming loop alone, against a driver
    whose methods return at once (microseconds)."""
    from captain_backends.core.driver import AdvanceReport, RobotState
    from captain_harness.core.executor import MotionExecutor

    class _Instant:
        control_period_s = 0.01

        def __init__(self, q: np.ndarray) -> None:
            self.report = AdvanceReport(0.01, 10, 0.0)
            self.state = RobotState(0.0, q, np.zeros(len(q)), 0.08, 1.0, np.zeros(6), 0.0, np.zeros(2))

        def send_command(self, command: Any) -> Any:
            return command

        def advance(self, guard: Any = None) -> Any:
            return self.report

        def read_state(self) -> Any:
            return self.state

        def hold(self) -> None:
            return None

    kin = prims.kin
    executor = MotionExecutor(_Instant(kin.home_rad), kin, prims.config.emergency_force_n)  # type: ignore[arg-type]
    targets = np.tile(kin.home_rad, (periods, 1))
    every = prims._state_every()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        executor.run(targets, guard=None, guarded_mode=True, cancel=prims._cancel_check(), state_every=every)
        best = min(best, time.perf_counter() - t0)
    return best / periods * 1e6


def run(**options: Any) -> dict[str, float]:
    """All figures. Options: ``n_ik`` (goal IK solves, default 300), ``sweeps``
    (horizontal tabletop sweeps, default 6), ``seed`` (default 0), ``sim`` (False to
    skip the MuJoCo part)."""
    from captain_backends.core.tabletop.panda_model import panda_model_files

    seed = int(options.get("seed", 0))
    out = bench_kinematics(panda_model_files().description, n_ik=int(options.get("n_ik", 300)), seed=seed)
    if options.get("sim", True):
        out.update(bench_sweeps(sweeps=int(options.get("sweeps", 6)), seed=seed))
    return out


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run()))
