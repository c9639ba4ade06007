"""``RobotHost`` without ROS: the driver lifecycle the harness node drives (configure,
activate, deactivate, cleanup), calls through the one ``RobotAPI`` (never raising),
episode resets that swap the driver, and the thread-shared driver wrapper.

Real drivers from the registry (``mock``, ``tabletop``); nothing of rclpy is imported.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from captain_backends.core.driver import JointCommand, LifecycleState, TaskInfo
from captain_harness.core.host.locked_driver import DriverThread, LockedDriver
from captain_harness.core.host.robot_host import (
    HostError,
    HostSettings,
    RobotHost,
    _construct,
    task_from_json,
    task_json,
    task_string,
)


@pytest.fixture(scope="module")
def host():
    """One configured mock host for the module (building the API takes seconds)."""
    h = RobotHost(HostSettings(driver="mock", image_size_px=32))
    h.configure()
    yield h
    h.shutdown()


def test_core_host_never_imports_rclpy() -> None:
    """Checked in a fresh interpreter: configuring a host there must not load rclpy (in this
    process other tests may already have loaded it)."""
    code = ("import sys\n"
            "from captain_harness.core.host.robot_host import HostSettings, RobotHost\n"
            "h = RobotHost(HostSettings(driver='mock', image_size_px=32)); h.configure(); h.shutdown()\n"
            "print('rclpy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_lifecycle_configure_activate_deactivate(host: RobotHost) -> None:
    # configured: states readable, inactive, not ready; physical calls fail with a result
    assert host.driver is not None and host.driver.lifecycle_state is LifecycleState.INACTIVE
    assert not host.ready
    state = host.call("get_robot_state")
    assert state.result["success"], state.result
    moved = host.call("hold", (), {"duration_s": 0.05})
    assert moved.result["success"] is False and moved.receipt.startswith("hold:")
    assert host.physical("move_to") and not host.physical("get_robot_state")

    host.activate()
    assert host.ready
    held = host.call("hold", (), {"duration_s": 0.05})
    assert held.result["success"], held.result
    host.activate()  # a no-op when active
    assert host.ready

    host.deactivate()
    assert host.driver.lifecycle_state is LifecycleState.INACTIVE and not host.ready
    assert host.current_fault() == ""
    host.activate()
    assert host.ready


def test_calls_never_raise_and_name_the_problem(host: RobotHost) -> None:
    unknown = host.call("teleport", (), {})
    assert unknown.result["success"] is False
    assert "teleport" in unknown.result["message"]
    bad = host.call("move_to", (), {"position": [0.4, 0.0], "speed": 0.05})
    assert bad.result["success"] is False and bad.result["failure_category"] == "invalid_argument"


def test_describe_reports_calls_and_driver(host: RobotHost) -> None:
    info = host.describe()
    assert info["driver"] == "mock" and info["robot"]
    assert set(info["names"]) == set(host.api.specs)
    move_to = next(c for c in info["calls"] if c["name"] == "move_to")
    assert move_to["physical"] and move_to["doc"]


def test_call_before_configure_and_activate_before_configure() -> None:
    h = RobotHost(HostSettings(driver="mock"))
    try:
        out = h.call("get_robot_state")
        assert out.result["success"] is False and out.result["failure_category"] == "not_available"
        assert "not ready" in out.result["message"]
        with pytest.raises(HostError, match="not configured"):
            h.activate()
    finally:
        h.shutdown()


def test_unknown_driver_names_the_registered_ones() -> None:
    with pytest.raises(HostError, match=r"set the harness parameter 'driver' to one of: .*mock.*tabletop"):
        _construct("mokc", {}, {})
    h = RobotHost(HostSettings(driver="mokc"))
    try:
        with pytest.raises(HostError):
            h.configure()
        assert "mokc" in h.last_error and h.api is None
    finally:
        h.shutdown()


def test_cleanup_then_configure_builds_a_fresh_driver() -> None:
    h = RobotHost(HostSettings(driver="mock", image_size_px=32))
    try:
        h.start()
        first = h.driver
        changes = []
        h.on_driver_change = changes.append
        h.cleanup()
        assert h.driver is None and h.api is None and first.lifecycle_state is LifecycleState.FINALIZED
        h.configure()
        assert h.driver is not first and changes == [h.driver]
    finally:
        h.shutdown()


def test_reset_episode_swaps_the_simulated_driver(tmp_path) -> None:
    h = RobotHost(HostSettings(driver="mock", image_size_px=32, workspace_dir=tmp_path / "ws"))
    try:
        h.start()
        old = h.driver
        start = h.reset_episode("tabletop/cube_on_plate", workspace=tmp_path / "episode")
        assert start.task.task_id == "tabletop/cube_on_plate"
        assert h.driver_name == "tabletop" and h.describe()["driver"] == "tabletop"
        assert old.lifecycle_state is LifecycleState.FINALIZED and h.ready
        assert h.host_state(include_snapshot=False)["available"] is True
        # the same task again (no task given: the loaded one)
        again = h.reset_episode(workspace=tmp_path / "episode2")
        assert again.task.task_id == "tabletop/cube_on_plate"
    finally:
        h.shutdown()


def test_task_helpers_round_trip() -> None:
    assert task_string("tabletop", "cube_on_plate") == "tabletop/cube_on_plate"
    assert task_string("libero", "libero_spatial/0") == "libero_spatial/0"
    assert task_string("mock", "") == ""
    info = TaskInfo(task_id="t/1", instruction="do it", suite="t", init_state=3, goals=("a",),
                    objects=("x", "y"), extra={"k": 1})
    assert task_from_json(task_json(info)) == info


def test_driver_thread_runs_calls_on_one_thread_then_inline() -> None:
    thread = DriverThread("test_driver")
    seen = {thread.run(lambda: threading.get_ident()) for _ in range(3)}
    assert len(seen) == 1 and threading.get_ident() not in seen
    with pytest.raises(ZeroDivisionError):
        thread.run(lambda: 1 / 0)
    thread.close()
    assert thread.run(lambda: threading.get_ident()) == threading.get_ident()


@contextlib.contextmanager
def _holding_mock(sim_speed: float = 0.0) -> Iterator[tuple[Any, LockedDriver]]:
    """(inner, locked) mock driver, configured, reset, active and commanded to hold where it is."""
    inner = _construct("mock", {}, {"image_size_px": 32})
    thread = DriverThread()
    driver = LockedDriver(inner, thread, sim_speed=sim_speed)
    try:
        driver.configure()
        driver.reset()
        driver.activate()
        q = np.asarray(driver.read_state().joint_positions_rad, float)
        driver.send_command(JointCommand(joint_positions_rad=q))
        yield inner, driver
    finally:
        driver.shutdown()
        thread.close()


def test_locked_driver_paces_simulated_time() -> None:
    with _holding_mock(sim_speed=2.0) as (_, driver):
        simulated = 0.0
        t0 = time.monotonic()
        while simulated < 0.4:
            simulated += float(driver.advance().duration_s)
        wall = time.monotonic() - t0
        # at most twice real time: 0.4 s of driver time takes at least ~0.2 s of wall time
        assert wall >= (simulated - driver.control_period_s) / 2.0 - 0.01, (wall, simulated)
        assert driver.lifecycle_state is LifecycleState.ACTIVE
        assert driver.description().name  # forwarded under the lock


def test_latest_state_never_waits_for_a_thread_that_holds_the_driver() -> None:
    """Publishers read with ``latest_state``: while another thread (a motion) holds the
    driver they get the last reading anyone took, at once; when the driver is free, a
    fresh one; after a reset, nothing until the next reading (never one from before)."""
    with _holding_mock() as (inner, driver):
        driver.advance()
        taken = driver.read_state()
        holding, release = threading.Event(), threading.Event()

        def motion() -> None:  # holds the driver and steps it, as a control loop would
            with driver.lock:
                driver.advance()
                holding.set()
                release.wait(1.0)  # a reader that waited for the lock would wait this long

        worker = threading.Thread(target=motion)
        worker.start()
        try:
            assert holding.wait(5.0)
            t0 = time.monotonic()
            seen = driver.latest_state()
            assert time.monotonic() - t0 < 0.05  # did not wait for the lock
            assert seen is taken  # the last reading, older than the driver's current time
            assert inner.read_state().time_s > seen.time_s
        finally:
            release.set()
            worker.join(5.0)
        fresh = driver.latest_state()  # the driver is free: read now
        assert fresh is not taken and fresh.time_s > taken.time_s
        driver.reset()
        with driver.lock:  # held elsewhere right after a reset: no reading from before it
            result: list = []
            reader = threading.Thread(target=lambda: result.append(driver.latest_state()))
            reader.start()
            reader.join(5.0)
        assert result == [None]


def test_latest_state_shares_a_recent_reading_of_a_simulated_driver() -> None:
    """``max_age_s``: publishers of one tick share one reading of a simulated driver (no
    second read while it is that recent); an older one is read again; a real driver is
    always read again (its stamps are the reading's wall time)."""
    with _holding_mock() as (inner, driver):
        assert inner.simulated
        driver.advance()
        taken = driver.read_state()
        assert driver.latest_state(max_age_s=5.0) is taken
        driver.advance()  # the driver moved on; the kept reading is still recent enough
        assert driver.latest_state(max_age_s=5.0) is taken
        assert driver.latest_state().time_s > taken.time_s  # no max age: read now
        time.sleep(0.03)
        later = driver.latest_state(max_age_s=0.01)  # too old: read again
        assert later is not taken and later.time_s > taken.time_s
        driver.reset()
        assert driver.latest_state(max_age_s=5.0) is not later  # never a reading from before a reset
        driver.simulated = False
        kept = driver.read_state()
        assert driver.latest_state(max_age_s=5.0) is not kept


def test_locked_driver_keeps_the_description_until_a_reset_or_transition() -> None:
    inner = _construct("mock", {}, {"image_size_px": 32})
    reads: list[int] = []
    original = inner.description
    inner.description = lambda: reads.append(1) or original()  # count reads of the real driver
    thread = DriverThread()
    driver = LockedDriver(inner, thread)
    try:
        driver.configure()
        first = driver.description()
        assert driver.description() is first and len(reads) == 1  # kept
        driver.reset()
        assert driver.description().name == first.name and len(reads) == 2  # read again after a reset
        driver.activate()
        driver.description()
        assert len(reads) == 3  # and after a lifecycle transition
    finally:
        driver.shutdown()
        thread.close()


@pytest.mark.sim
def test_the_self_filter_is_built_before_the_driver_is_activated() -> None:
    """Loading the robot's meshes holds the interpreter; a host builds them before it
    activates the driver (a real driver's receive thread must not stall while commands
    stream), not in the background during the first motion."""
    h = RobotHost(HostSettings(driver="tabletop", image_size_px=64))
    h.configure()
    try:
        assert h.driver.lifecycle_state is LifecycleState.INACTIVE
        spec = h.api.specs["mark_point"]
        provider = getattr(spec.fn, "__self__", None)
        assert provider is not None and hasattr(provider, "prepare"), spec.fn
        assert provider._self_filter_future is None
        assert provider._self_filter is not None, provider.self_filter_error
    finally:
        h.shutdown()
