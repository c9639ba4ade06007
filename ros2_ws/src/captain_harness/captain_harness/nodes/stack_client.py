"""Episodes on running bringups over ROS 2: the client side of ``--stacks``.

``StackFleet(["/robot1", "/robot2"])`` owns one private rclpy context, node and executor
thread (no signal handlers), and per stack an action client of ``<ns>/run_episode`` and a
subscription to ``<ns>/diagnostics``, where the episode runner reports itself every second
(``diagnostics_rate_hz``), episode or not. ``fleet.run(stack, job)`` sends one episode goal
and waits for its result; it raises ``core.episode.stacks.StackUnavailable`` when the stack

* is not discovered or does not answer a probe goal within ``connect_timeout_s``;
* does not accept or refuse the goal within ``goal_timeout_s``, or refuses it (another
  client's episode is running there);
* goes silent: no diagnostics from its episode runner for ``heartbeat_timeout_s`` (the
  processes died or hang), no feedback or result for ``stall_timeout_s``, or no result
  ``result_margin_s`` after the episode's wall-time budget;
* cancels the episode itself (it is shutting down) or aborts it with an infrastructure
  failure other than an unreachable policy server.

On a timeout it cancels the goal (best effort) so that a stack that comes back does not
keep running an episode nobody waits for. ``rollout_on_stacks`` is the batch: the same
jobs, outcome dicts and summary as ``runner.rollout``, with each episode's record copied
from the stack's ``records_dir`` into ``out_dir`` (when this machine can read it).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from captain_harness.core.episode.stacks import StackUnavailable, run_on_stacks

#: the episode runner's error when its own shutdown cancelled the episode (``CancellablePolicy``).
_CANCELLED_BY_STACK = "cancelled by its action client"


@dataclass
class StackTimeouts:
    """How long the client waits for a stack (all in seconds).

    Attributes:
        connect_timeout_s: discovery of the stack's ``run_episode`` and its answer to a probe.
        goal_timeout_s: the answer (accepted or refused) to an episode goal.
        heartbeat_timeout_s: silence of the episode runner's diagnostics that marks the stack dead.
        stall_timeout_s: time without feedback or result while an episode runs (one request:
            the policy's reply and the cell's robot calls).
        result_margin_s: wait for the result past the episode's wall-time budget.
    """

    connect_timeout_s: float = 60.0
    goal_timeout_s: float = 30.0
    heartbeat_timeout_s: float = 30.0
    stall_timeout_s: float = 900.0
    result_margin_s: float = 120.0


class StackFleet:
    """Action clients of the stacks' episode runners (see the module docstring).

    Args:
        stacks: the stacks' namespaces, e.g. ``["/robot1", "/robot2"]``.
        timeouts: how long to wait for a stack.
        node_name: name of the client's own node.
    """

    def __init__(self, stacks: Sequence[str], *, timeouts: StackTimeouts | None = None,
                 node_name: str = "captain_stack_client") -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.action import ActionClient

        from captain_interfaces.action import RunEpisode

        self.stacks = list(stacks)
        self.timeouts = timeouts or StackTimeouts()
        self._RunEpisode = RunEpisode
        from captain_harness.nodes.private_node import PrivateNode

        self._private = PrivateNode(node_name)
        self.node = self._private.node
        self._lock = threading.Lock()
        now = time.monotonic()
        self._last_seen = {s: now for s in self.stacks}
        self._connected: set[str] = set()
        self._actions = {s: ActionClient(self.node, RunEpisode, f"{s}/run_episode") for s in self.stacks}
        self._subs = [self.node.create_subscription(DiagnosticArray, f"{s}/diagnostics",
                                                    lambda msg, s=s: self._on_diagnostics(s, msg), 10)
                      for s in self.stacks]
        self._closed = threading.Event()
        self._private.start()

    def _on_diagnostics(self, stack: str, msg: Any) -> None:
        if any("episode_runner" in status.name for status in msg.status):
            with self._lock:
                self._last_seen[stack] = time.monotonic()

    def silent_s(self, stack: str) -> float:
        """Seconds since the stack's episode runner last published its diagnostics."""
        with self._lock:
            return time.monotonic() - self._last_seen[stack]

    # -------------------------------------------------------------- connection
    @staticmethod
    def _wait(future: Any, timeout_s: float) -> bool:
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        return done.wait(max(0.0, timeout_s))

    def connect(self, stack: str) -> None:
        """Discover the stack's ``run_episode`` and have it answer a goal it refuses (a goal
        without task or instruction), so that its replies reach this client (Fast DDS can
        drop the first reply to a client the server has just discovered: the server has
        not yet matched the client's reply reader). Unanswered probes are sent again after
        0.1 s, doubling up to 2 s (a fixed 2 s wait made the first dropped reply cost 2 s
        of every batch that met it).

        Raises:
            StackUnavailable: not discovered or no answer within ``connect_timeout_s``.
        """
        if stack in self._connected:
            return
        action = self._actions[stack]
        deadline = time.monotonic() + self.timeouts.connect_timeout_s
        if not action.wait_for_server(timeout_sec=self.timeouts.connect_timeout_s):
            raise StackUnavailable(f"{stack}: no run_episode action within {self.timeouts.connect_timeout_s:g} s; "
                                   "is `captain bringup` running in that namespace and ROS_DOMAIN_ID?", retire=True)
        wait_s = 0.1  # a dropped reply is asked again soon: 0.1 s, doubling up to 2 s
        while time.monotonic() < deadline:
            future = action.send_goal_async(self._RunEpisode.Goal())
            answered = self._wait(future, min(wait_s, deadline - time.monotonic()))
            wait_s = min(2.0, 2.0 * wait_s)
            if answered:
                handle = future.result()
                if handle.accepted:  # cannot happen with the shipped runner; do not leave it running
                    handle.cancel_goal_async()
                self._connected.add(stack)
                return
        raise StackUnavailable(f"{stack}: run_episode did not answer within {self.timeouts.connect_timeout_s:g} s",
                               retire=True)

    # ----------------------------------------------------------------- episode
    def run(self, stack: str, job: dict[str, Any], on_feedback: Callable[[str, Any], None] | None = None
            ) -> dict[str, Any]:
        """Run one episode on ``stack`` and return its outcome dict (``EpisodeOutcome.to_dict``).

        Args:
            stack: the stack's namespace.
            job: ``task``, ``init_state``, optional ``seed``, ``policy``, ``policy_options``
                and ``settings`` (the runner's ``settings_json`` keys) and ``max_wall_s``.
            on_feedback: called with (stack, feedback) after each request.

        Raises:
            StackUnavailable: see the module docstring.
        """
        from action_msgs.msg import GoalStatus

        self.connect(stack)
        if self.silent_s(stack) > self.timeouts.heartbeat_timeout_s:
            raise StackUnavailable(f"{stack}: its episode runner published no diagnostics for "
                                   f"{self.silent_s(stack):.0f} s", retire=True)
        options = dict(job.get("policy_options") or {})
        settings = dict(job.get("settings") or {})
        settings["policy_options"] = options
        if job.get("seed") is not None:
            settings["seed"] = int(job["seed"])
        goal = self._RunEpisode.Goal(task=job["task"], init_state=int(job["init_state"]), policy=job["policy"],
                                     settings_json=json.dumps(settings))
        activity = [time.monotonic()]

        def feedback(msg: Any) -> None:
            activity[0] = time.monotonic()
            if on_feedback is not None:
                on_feedback(stack, msg.feedback)

        send = self._actions[stack].send_goal_async(goal, feedback_callback=feedback)
        if not self._wait(send, self.timeouts.goal_timeout_s):
            raise StackUnavailable(f"{stack}: the episode goal was not answered within "
                                   f"{self.timeouts.goal_timeout_s:g} s", retire=True)
        handle = send.result()
        if not handle.accepted:
            raise StackUnavailable(f"{stack}: refused the episode goal (another client's episode is running there, "
                                   "or the goal is invalid: see the stack's log)", retire=False)
        started = activity[0] = time.monotonic()
        result_future = handle.get_result_async()
        deadline = started + float(job.get("max_wall_s", 1080.0)) + self.timeouts.result_margin_s
        problem = ""
        while not self._wait(result_future, 0.25):
            now = time.monotonic()
            if self._closed.is_set():
                problem = "the client was closed"
            elif self.silent_s(stack) > self.timeouts.heartbeat_timeout_s:
                problem = (f"its episode runner published no diagnostics for {self.silent_s(stack):.0f} s "
                           "(the stack died or hangs)")
            elif now - activity[0] > self.timeouts.stall_timeout_s:
                problem = f"no feedback or result for {now - activity[0]:.0f} s"
            elif now > deadline:
                problem = f"no result {self.timeouts.result_margin_s:g} s after the episode's wall-time budget"
            if problem:
                with contextlib.suppress(Exception):
                    handle.cancel_goal_async()
                raise StackUnavailable(f"{stack}: {problem}", retire=True)
        response = result_future.result()
        try:
            outcome = json.loads(response.result.summary_json or "{}")
        except ValueError:
            outcome = {}
        if response.status == GoalStatus.STATUS_CANCELED:
            raise StackUnavailable(f"{stack}: the stack cancelled the episode (it is shutting down)", retire=True)
        if not outcome.get("outcome"):
            error = outcome.get("error") or response.result.outcome or f"goal status {response.status}"
            raise StackUnavailable(f"{stack}: the episode did not run: {error}", retire=False,
                                   outcome=None)
        if _CANCELLED_BY_STACK in str(outcome.get("error") or ""):
            raise StackUnavailable(f"{stack}: the stack stopped the episode (it is shutting down)", retire=True)
        if outcome["outcome"] == "infrastructure_failure" and outcome.get("end_reason") != "policy_unavailable":
            raise StackUnavailable(f"{stack}: infrastructure failure: {str(outcome.get('error'))[:300]}",
                                   retire=False, outcome=outcome)
        return outcome

    def close(self) -> None:
        """Stop the executor thread and release the context."""
        self._closed.set()
        self._private.close()


def episode_settings(config: Any) -> dict[str, Any]:
    """The episode runner's ``settings_json`` for an ``EpisodeConfig`` (budgets, cell time,
    subset, MCAP, snapshots)."""
    return {
        "max_requests": int(config.limits.max_requests),
        "max_physical_actions": int(config.limits.max_physical_actions),
        "max_wall_time_s": float(config.limits.max_wall_time_s),
        "cell_timeout_s": float(config.loop.cell_timeout_s),
        "subset": str(config.subset),
        "mcap": bool(config.mcap),
        "record_snapshots": bool(config.loop.record_snapshots),
    }


def copy_record(outcome: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Copy the episode's folder from the stack's records root to ``out_dir/episodes/``
    (where an in-process episode writes it); ``record_dir`` then names the copy and
    ``stack_record_dir`` the original. A folder this machine cannot read (a stack on
    another computer) stays where it is; a copy that fails leaves ``record_dir`` on the
    stack and says why in ``record_copy_error`` (the episode is not run again)."""
    source = Path(str(outcome.get("record_dir") or ""))
    if not outcome.get("record_dir") or not source.is_dir():
        return outcome
    target = Path(out_dir) / "episodes" / source.name
    if target.resolve() == source.resolve():
        return outcome
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    except OSError as exc:  # the episode ran: its record stays on the stack, and the outcome says so
        return {**outcome, "record_copy_error": f"{type(exc).__name__}: {exc}"}
    return {**outcome, "record_dir": str(target), "stack_record_dir": str(source)}


def rollout_on_stacks(
    tasks: Sequence[str],
    states: Sequence[int],
    *,
    stacks: Sequence[str],
    policy: Any,
    out_dir: str | Path,
    episodes: int | None = None,
    config: Any = None,
    progress: Callable[[str | None, dict[str, Any]], None] | None = None,
    on_attempt_failed: Callable[[str, dict[str, Any], str], None] | None = None,
    on_feedback: Callable[[str, Any], None] | None = None,
    timeouts: StackTimeouts | None = None,
    copy_records: bool = True,
    fleet: StackFleet | None = None,
) -> dict[str, Any]:
    """``runner.rollout`` on running stacks: the same (task, state) grid, cycled to
    ``episodes``, one episode per stack at a time; returns the same summary (``workers`` is
    the number of stacks) plus ``outcomes`` (job order), ``stacks`` and ``stack_failures``
    (failed attempts, each retried on another stack). ``fleet``: an open ``StackFleet`` of
    ``stacks`` to send the episodes through (its connections are reused, and it stays open
    for the next batch); None: one of the batch's own (``timeouts``), closed at its end."""
    from captain_harness.core.episode.runner import EpisodeConfig, summarize

    cfg = config or EpisodeConfig()
    grid = [(t, s) for t in tasks for s in (states or [-1])]
    if not grid:
        raise ValueError("rollout needs at least one task")
    total = episodes if episodes is not None else len(grid)
    settings = episode_settings(cfg)
    jobs = [{"task": grid[i % len(grid)][0], "init_state": grid[i % len(grid)][1], "policy": policy.name,
             "policy_options": dict(policy.options), "settings": settings,
             "max_wall_s": float(cfg.limits.max_wall_time_s)} for i in range(total)]
    own_fleet = fleet is None
    if fleet is None:
        fleet = StackFleet(stacks, timeouts=timeouts)
    elif set(fleet.stacks) != set(stacks):
        raise ValueError(f"the fleet's stacks {fleet.stacks} are not the batch's {list(stacks)}")
    started = time.monotonic()
    try:
        def run_one(stack: str, job: dict[str, Any]) -> dict[str, Any]:
            outcome = fleet.run(stack, job, on_feedback)
            return copy_record(outcome, out_dir) if copy_records else outcome

        outcomes = run_on_stacks(jobs, stacks, run_one, progress=progress, on_attempt_failed=on_attempt_failed)
    finally:
        if own_fleet:
            fleet.close()
    summary = summarize(outcomes, time.monotonic() - started, len(stacks))
    summary["stacks"] = list(stacks)
    summary["stack_failures"] = sum(len(o.get("stack_attempts") or []) for o in outcomes)
    summary["outcomes"] = outcomes
    return summary
