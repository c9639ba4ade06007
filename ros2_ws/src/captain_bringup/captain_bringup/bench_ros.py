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
  process as ``captain rollout`` does (a robot built per episode). The teacher is seeded
  (``policy_seed``), so both ways run the same episodes call for call;
  ``strict_success_*`` and ``mean_requests_*`` show that they did.

  The episodes run in ``rounds`` interleaved rounds on one bringup: each round runs its
  share of the episodes over ROS and the same share in process (every other round in
  process first), so both ways see the same stretches of machine time (the speed of a
  small virtual machine drifts by tens of percent over tens of seconds; one batch each way,
  run one after the other, gave ratios ±0.07 apart with nothing changed). Each way runs one
  uncounted warm-up episode first (imports and caches, and the client's connection to the
  stack: ``captain rollout --stacks`` pays these once per batch, a long batch's share of
  them is small). The ROS rounds share one client (``StackFleet``), as the episodes of one
  batch do. Rates are over the summed wall time of each way's batches;
  ``episodes_per_hour_ratio_ros_min`` / ``_max`` are the ratios of single rounds.
  While the in-process batches run, the bringup stands idle beside them:
  ``idle_stack_cpu_fraction`` is the CPU its processes took then (cores, 1.0 = one core
  busy), so a reader can see what that costs the in-process figure.

The ROS calls run against the bringup just measured, on an isolated ROS domain with
discovery on localhost (Fast DDS).

Options: ``driver`` (the harness driver of the measured stack, default: the sim
overlay's), ``calls`` (default 200), ``ready_timeout_s`` (default 300), ``episodes``
(default 4; 0 skips the episode figures), ``rounds`` (default 4, at most ``episodes``),
``task`` (default ``tabletop/cube_on_plate``), ``policy`` (default ``teacher``),
``policy_seed`` (the teacher's ``seed`` option, default 0; -1 lets every episode draw a
style of its own, so the two ways differ in their requests).
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


def _episode_batch(where: str, task: str, states: list[int], policy: str, records: str,
                   policy_seed: int = 0, fleet: Any = None) -> dict[str, Any]:
    """One batch of the same teacher episodes: over ROS on the running bringup (no
    namespace; through ``fleet`` when given), or in process."""
    from captain_harness.core.episode.policy.registry import PolicySpec

    spec = PolicySpec(policy, {"seed": int(policy_seed)} if policy == "teacher" and int(policy_seed) >= 0 else {})
    if where == "ros":
        from captain_harness.nodes.stack_client import rollout_on_stacks

        return rollout_on_stacks([task], states, stacks=[""], policy=spec, out_dir=f"{records}/ros", fleet=fleet)
    from captain_harness.core.episode.runner import rollout

    return rollout([task], states, policy=spec, out_dir=f"{records}/in_process")


def _episode_figures(batches: dict[str, list[dict[str, Any]]], episodes: int) -> dict[str, float]:
    """Rates over the summed wall time of each way's batches; per-round ratio spread."""
    from captain_harness.core.episode.runner import summarize

    figures: dict[str, float] = {}
    for key, rounds in batches.items():
        summary = summarize([o for r in rounds for o in r["outcomes"]], sum(r["wall_s"] for r in rounds), 1)
        figures[f"episodes_per_hour_{key}"] = round(3600.0 * summary["episodes"] / summary["wall_s"], 2)
        figures[f"strict_success_{key}"] = summary["strict_success"]
        figures[f"mean_requests_{key}"] = summary["mean_requests"]
        figures[f"infrastructure_failures_{key}"] = float(summary["infrastructure_failures"])
    figures["episodes_per_hour_ratio_ros"] = round(figures["episodes_per_hour_ros"]
                                                   / max(figures["episodes_per_hour_in_process"], 1e-9), 3)
    per_round = [ip["wall_s"] / max(ros["wall_s"], 1e-9)
                 for ros, ip in zip(batches["ros"], batches["in_process"], strict=True)]
    figures["episodes_per_hour_ratio_ros_min"] = round(min(per_round), 3)
    figures["episodes_per_hour_ratio_ros_max"] = round(max(per_round), 3)
    figures["episodes"] = float(episodes)
    figures["rounds"] = float(len(per_round))
    return figures


def _round_states(episodes: int, rounds: int) -> list[list[int]]:
    """Initial states ``0..episodes-1`` in ``rounds`` contiguous shares (sizes differ by at
    most one; no empty share)."""
    rounds = max(1, min(int(rounds), int(episodes)))
    size, extra = divmod(int(episodes), rounds)
    shares, first = [], 0
    for r in range(rounds):
        n = size + (1 if r < extra else 0)
        shares.append(list(range(first, first + n)))
        first += n
    return shares


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of the processes ``pids`` and their children so far
    (Linux ``/proc``; processes that are gone count 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def _stack_pids(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def run(driver: str | None = None, calls: int = 200, ready_timeout_s: float = 300.0, episodes: int = 4,
        task: str = "tabletop/cube_on_plate", policy: str = "teacher", policy_seed: int = 0,
        rounds: int = 4) -> dict[str, float]:
    """The figures (see the module docstring)."""
    import shutil
    import tempfile

    from captain_bringup.runner import stack_params
    from captain_harness.core.budget import Budget
    from captain_harness.core.host.robot_host import UNLIMITED, HostSettings, RobotHost
    from captain_harness.nodes.harness_params import motion_config
    from captain_harness.nodes.ros_robot_client import RosRobotClient, remote_api
    from captain_harness.nodes.stack_client import StackFleet
    from captain_perception.nodes.dds_profile import localhost_domain

    if int(rounds) < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
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

    batches: dict[str, list[dict[str, Any]]] = {"ros": [], "in_process": []}
    idle_cpu_s = idle_wall_s = 0.0
    seed = int(policy_seed)
    records = tempfile.mkdtemp(prefix="captain_bench_ros_")
    try:
        with localhost_domain():
            proc, ready_s = _start_stack(["--param", f"harness.driver={driver}",
                                          "--param", "harness.camera_rate_hz=0.0",
                                          "--param", f"episode_runner.records_dir={records}/stack"], ready_timeout_s)
            try:
                ros_call, ros_action = _ros_call_medians(RosRobotClient, remote_api, Budget(UNLIMITED), calls)
                if episodes > 0:
                    fleet = StackFleet([""])
                    try:
                        for way in ("ros", "in_process"):  # warm-up, not counted
                            _episode_batch(way, task, [0], policy, records, seed, fleet)
                        stack = _stack_pids(proc.pid)
                        for r, states in enumerate(_round_states(episodes, rounds)):
                            for way in (("ros", "in_process") if r % 2 == 0 else ("in_process", "ros")):
                                cpu0 = _cpu_s(stack)
                                batches[way].append(_episode_batch(way, task, states, policy, records, seed, fleet))
                                if way == "in_process":
                                    idle_cpu_s += _cpu_s(stack) - cpu0
                                    idle_wall_s += batches[way][-1]["wall_s"]
                    finally:
                        fleet.close()
            finally:
                _stop(proc)
    finally:
        shutil.rmtree(records, ignore_errors=True)

    figures["roundtrip_overhead_ms_median"] = round(ros_call - local_call, 3)
    figures["bringup_ready_s"] = round(ready_s, 3)
    figures["action_roundtrip_overhead_ms_median"] = round(ros_action - local_action, 3)
    figures["in_process_call_ms_median"] = round(local_call, 4)
    figures["ros_call_ms_median"] = round(ros_call, 3)
    figures["in_process_hold_ms_median"] = round(local_action, 4)
    figures["ros_hold_ms_median"] = round(ros_action, 3)
    figures["calls"] = float(calls)
    if episodes > 0:
        figures.update(_episode_figures(batches, int(episodes)))
        figures["idle_stack_cpu_fraction"] = round(idle_cpu_s / max(idle_wall_s, 1e-9), 4)
    return figures


def _ros_call_medians(client_cls: Any, remote_api: Any, budget: Any, calls: int) -> tuple[float, float]:
    """Median ms of ``gripper_state`` and ``hold(duration_s=0)`` through the ROS robot
    client, against the stack on this process's ROS domain."""
    client = client_cls(call_timeout_s=60.0)
    try:
        if not client.wait_for_harness(60.0):
            raise RuntimeError("the harness node was not discovered")
        api = remote_api(client, budget)
        return (_median_ms(lambda: api.call("gripper_state"), calls),
                _median_ms(lambda: api.call("hold", (), {"duration_s": 0.0}), calls))
    finally:
        client.close()
