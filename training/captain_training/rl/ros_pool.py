"""The ``ros`` rollout pool: RL episodes against running sim stacks (``captain bringup sim
--namespace ...``) instead of a simulator built per episode.

``RosPool(["/robot1", "/robot2"])`` keeps one spawned worker process per stack. A job runs
``rollout.collect_episode`` there, in full (the policy client with its token ids and
versions, the sandboxed session, the loop, the critic cut and missed-finish stop), with
the episode backend ``ros_robot_client.ros_backend``: the stack's harness node resets its
scene for the start state, every ``robot.<call>`` travels over ROS, and the privileged
``SimSnapshot`` the before-request hook turns into critic features comes from the
harness's ``episode/host_state`` service. That service exists only on simulated stacks
and is called by the rollout worker on the host; the policy's session never sees it.

One episode per stack at a time (``core.episode.stacks.run_on_stacks``). A stack that
dies (its worker process breaks, or the episode outlives its wall-time budget by
``margin_s``) is retired and its episode retried on another stack; an episode that ends
as an infrastructure failure on a stack (unreachable harness: ``harness_error``) is
retried once on each other stack before it is returned unusable.

Limits: the harness resets to official initial states (``init_state``) and layout seeds;
the RL wide-layout random starts (``rl.backends.wide_layout_backend``) are not available
on a stack, so ``rollout.pool: ros`` needs ``rollout.wide_layout_fraction: 0`` (checked in
``RolloutConfig``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from captain_training.rl.errors import ConfigError
from captain_training.rl.rollout import RolloutJob, job_to_dict

#: the worker process's robot client (one per process: one stack per process).
_CLIENT: Any = None
_NAMESPACE = ""
_CONNECT_S = 60.0


def _init_worker(namespace: str, connect_timeout_s: float) -> None:
    global _NAMESPACE, _CONNECT_S
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _NAMESPACE, _CONNECT_S = namespace, float(connect_timeout_s)


def _collect_on_stack(job: dict[str, Any]) -> dict[str, Any]:
    """``collect_episode`` in the stack's worker process, its robot the stack's harness."""
    import traceback

    from captain_training.rl.rollout import collect_episode

    global _CLIENT
    try:
        from captain_harness.nodes.ros_robot_client import RosRobotClient, ros_backend

        if _CLIENT is None:
            # a robot call never waits longer than a cell may run
            _CLIENT = RosRobotClient(_NAMESPACE, call_timeout_s=float(job.get("cell_timeout_s", 120.0)) + 30.0,
                                     node_name="captain_rl_robot_client")
            if not _CLIENT.wait_for_harness(_CONNECT_S):
                client, _CLIENT = _CLIENT, None
                client.close()
                raise RuntimeError(f"the harness in {_NAMESPACE or '/'} was not reachable within {_CONNECT_S:g} s")
        return collect_episode(job, backend_factory=ros_backend(_CLIENT))
    except Exception as exc:
        return {"job": job, "usable": False, "end_reason": "harness_error", "termination": "error",
                "host_success": False, "requests": 0, "critic_values": [], "wall_s": 0.0,
                "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"}


class RosPool:
    """Episodes on running sim stacks (see the module docstring).

    Args:
        namespaces: the stacks' namespaces, e.g. ``["/robot1", "/robot2"]``.
        margin_s: wait past an episode's wall-time budget before its stack counts as dead, s.
        connect_timeout_s: wait for a stack's harness (discovery and probes) in its worker, s.
    """

    kind = "ros"
    streams = True

    def __init__(self, namespaces: Sequence[str], margin_s: float = 300.0, connect_timeout_s: float = 60.0) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from captain_harness.core.episode.stacks import parse_stacks

        if not namespaces:
            raise ConfigError("rollout.pool ros needs rollout.namespaces, e.g. [/robot1, /robot2]")
        try:
            self.namespaces = parse_stacks(",".join(namespaces))
        except ValueError as exc:
            raise ConfigError(f"rollout.namespaces: {exc}") from exc
        self.margin_s = float(margin_s)
        context = multiprocessing.get_context("spawn")
        self.executors = {ns: ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_init_worker,
                                                  initargs=(ns, connect_timeout_s)) for ns in self.namespaces}
        self.retried = 0

    def _run_one(self, stack: str, job: dict[str, Any]) -> dict[str, Any]:
        from concurrent.futures import TimeoutError as FutureTimeout
        from concurrent.futures.process import BrokenProcessPool

        from captain_harness.core.episode.stacks import StackUnavailable

        wait_s = float(job.get("max_wall_time_s", 1080.0)) + self.margin_s
        try:
            result = self.executors[stack].submit(_collect_on_stack, job).result(timeout=wait_s)
        except FutureTimeout as exc:
            raise StackUnavailable(f"{stack}: no episode result within {wait_s:g} s", retire=True) from exc
        except BrokenProcessPool as exc:
            raise StackUnavailable(f"{stack}: its rollout worker process died", retire=True) from exc
        if not result.get("usable") and result.get("end_reason") == "harness_error":
            error = str(result.get("error") or (result.get("outcome") or {}).get("error") or "")[:300]
            raise StackUnavailable(f"{stack}: harness error: {error}", retire=False, outcome=result)
        return result

    def _collect(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from captain_harness.core.episode.stacks import run_on_stacks

        def failed(stack: str, job: dict[str, Any], error: str) -> None:
            self.retried += 1

        results = run_on_stacks(jobs, self.namespaces, self._run_one, on_attempt_failed=failed)
        out = []
        for job, result in zip(jobs, results, strict=True):
            if "job" not in result:  # no stack could run it: the scheduler's infrastructure failure
                result = {"job": job, "usable": False, "end_reason": "harness_error", "termination": "error",
                          "host_success": False, "requests": 0, "critic_values": [], "wall_s": 0.0,
                          "error": result.get("error"), "stack": None,
                          "stack_attempts": result.get("stack_attempts", [])}
            out.append(result)
        return out

    def run(self, jobs: Sequence[RolloutJob]) -> list[dict[str, Any]]:
        return self._collect([job_to_dict(j) for j in jobs])

    def submit(self, jobs: Sequence[RolloutJob]) -> Any:
        """Start the episodes on the stacks; returns a handle for ``wait``."""
        box: dict[str, Any] = {}
        dicts = [job_to_dict(j) for j in jobs]

        def work() -> None:
            try:
                box["results"] = self._collect(dicts)
            except BaseException as exc:  # re-raised by wait
                box["error"] = exc

        thread = threading.Thread(target=work, name="ros_pool_round", daemon=True)
        thread.start()
        return thread, box

    def wait(self, handle: Any) -> list[dict[str, Any]]:
        thread, box = handle
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["results"]

    def close(self) -> None:
        for executor in self.executors.values():
            executor.shutdown(wait=False, cancel_futures=True)
