"""`captain bench ros`: what ROS 2 adds to a robot call, and how long bringup takes.

* ``bringup_ready_s``: wall time from starting ``captain bringup sim`` (a fresh process,
  the shipped sim parameters) to its READY line (every node up, the driver active).
* ``roundtrip_overhead_ms_median``: a trivial primitive (``gripper_state``) called
  through the ROS robot client (service round trip to the harness node) minus the same
  call on an in-process ``RobotAPI`` over the same driver type, median over ``calls``.
* ``action_roundtrip_overhead_ms_median``: the same for a trivial physical primitive
  (``hold(duration_s=0)``, an action goal: send, accept, result).
* the medians themselves, in-process and over ROS.

* ``episodes_per_hour_ros`` / ``episodes_per_hour_in_process`` and their ratio
  ``episodes_per_hour_ratio_ros`` (target >= 0.8): the same teacher episodes (``task``,
  initial states ``0..episodes-1``), one at a time, sent to the bringup's ``run_episode``
  action as ``captain rollout --stacks`` does (records copied back included) and run in
  process as ``captain rollout`` does (a robot built per episode); wall time of each
  batch. The teacher is seeded (``policy_seed``), so both batches run the same episodes call
  for call; ``strict_success_*`` and ``mean_requests_*`` show that they did.

The ROS calls run against the bringup just measured, on an isolated ROS domain with
discovery on localhost (Fast DDS).

Options: ``driver`` (the harness driver of the measured stack, default: the sim
overlay's), ``calls`` (default 200), ``ready_timeout_s`` (default 300), ``episodes``
(default 4; 0 skips the episode figures), ``task`` (default ``tabletop/cube_on_plate``),
``policy`` (default ``teacher``), ``policy_seed`` (the teacher's ``seed`` option, default 0;
-1 lets every episode draw a style of its own, so the two batches differ in their requests).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Any


def _median_ms(fn, calls: int) -> float:
    for _ in range(min(10, calls)):
        fn()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return 1000.0 * statistics.median(samples)


def _start_stack(args: list[str], timeout_s: float) -> tuple[subprocess.Popen, float]:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "captain_bringup.cli.main", "bringup", "sim", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert proc.stdout is not None
    deadline = started + timeout_s
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("READY"):
            return proc, time.perf_counter() - started
        if time.perf_counter() > deadline:
            break
    proc.kill()
    raise RuntimeError("captain bringup sim did not become ready:\n" + "".join(lines[-20:]))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _episode_batch(where: str, task: str, episodes: int, policy: str, records: str,
                   policy_seed: int = 0) -> dict[str, Any]:
    """One batch of the same teacher episodes: over ROS on the running bringup (no
    namespace), or in process."""
    from captain_harness.core.episode.policy.registry import PolicySpec

    spec = PolicySpec(policy, {"seed": int(policy_seed)} if policy == "teacher" and int(policy_seed) >= 0 else {})
    states = list(range(episodes))
    if where == "ros":
        from captain_harness.nodes.stack_client import rollout_on_stacks

        return rollout_on_stacks([task], states, stacks=[""], policy=spec, out_dir=f"{records}/ros")
    from captain_harness.core.episode.runner import rollout

    return rollout([task], states, policy=spec, out_dir=f"{records}/in_process")


def _episode_figures(batches: dict[str, dict[str, Any]], episodes: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    for key, summary in batches.items():
        figures[f"episodes_per_hour_{key}"] = round(3600.0 * summary["episodes"] / summary["wall_s"], 2)
        figures[f"strict_success_{key}"] = summary["strict_success"]
        figures[f"mean_requests_{key}"] = summary["mean_requests"]
        figures[f"infrastructure_failures_{key}"] = float(summary["infrastructure_failures"])
    figures["episodes_per_hour_ratio_ros"] = round(figures["episodes_per_hour_ros"]
                                                   / max(figures["episodes_per_hour_in_process"], 1e-9), 3)
    figures["episodes"] = float(episodes)
    return figures


def run(driver: str | None = None, calls: int = 200, ready_timeout_s: float = 300.0, episodes: int = 4,
        task: str = "tabletop/cube_on_plate", policy: str = "teacher", policy_seed: int = 0
        ) -> dict[str, float]:
    """The figures (see the module docstring)."""
    import shutil
    import tempfile

    from captain_bringup.runner import stack_params
    from captain_harness.core.budget import Budget
    from captain_harness.core.host.robot_host import UNLIMITED, HostSettings, RobotHost
    from captain_harness.nodes.harness_params import motion_config
    from captain_harness.nodes.ros_robot_client import RosRobotClient, remote_api
    from captain_perception.nodes.dds_profile import fresh_domain

    params = stack_params("sim", overrides={"harness": {"driver": driver}} if driver else None)["harness"]
    driver = driver or params.get("driver", "mock")
    figures: dict[str, float] = {}

    host = RobotHost(HostSettings(driver=driver, task=params.get("task", ""), seed=int(params.get("seed", -1)),
                                  motion=motion_config(params)))
    host.start()
    try:
        local_call = _median_ms(lambda: host.call("gripper_state"), calls)
        local_action = _median_ms(lambda: host.call("hold", (), {"duration_s": 0.0}), calls)
    finally:
        host.shutdown()

    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    with fresh_domain() as did:
        os.environ["ROS_DOMAIN_ID"] = str(did)
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        records = tempfile.mkdtemp(prefix="captain_bench_ros_")
        proc, ready_s = _start_stack(["--param", f"harness.driver={driver}", "--param", "harness.camera_rate_hz=0.0",
                                      "--param", f"episode_runner.records_dir={records}/stack"], ready_timeout_s)
        client = None
        batches: dict[str, dict[str, Any]] = {}
        try:
            client = RosRobotClient(call_timeout_s=60.0)
            if not client.wait_for_harness(60.0):
                raise RuntimeError("the harness node was not discovered")
            api = remote_api(client, Budget(UNLIMITED))
            ros_call = _median_ms(lambda: api.call("gripper_state"), calls)
            ros_action = _median_ms(lambda: api.call("hold", (), {"duration_s": 0.0}), calls)
            client.close()
            client = None
            if episodes > 0:
                batches["ros"] = _episode_batch("ros", task, int(episodes), policy, records, int(policy_seed))
        finally:
            if client is not None:
                client.close()
            _stop(proc)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    figures["roundtrip_overhead_ms_median"] = round(ros_call - local_call, 3)
    figures["bringup_ready_s"] = round(ready_s, 3)
    figures["action_roundtrip_overhead_ms_median"] = round(ros_action - local_action, 3)
    figures["in_process_call_ms_median"] = round(local_call, 4)
    figures["ros_call_ms_median"] = round(ros_call, 3)
    figures["in_process_hold_ms_median"] = round(local_action, 4)
    figures["ros_hold_ms_median"] = round(ros_action, 3)
    figures["calls"] = float(calls)
    if episodes > 0:  # in process once the bringup has stopped: neither batch shares the CPU with the other
        batches["in_process"] = _episode_batch("in_process", task, int(episodes), policy, records,
                                               int(policy_seed))
        figures.update(_episode_figures(batches, int(episodes)))
    shutil.rmtree(records, ignore_errors=True)
    return figures
