"""``episode_runner_node``: whole code-as-policy episodes as a ROS 2 action (thin over
``captain_harness.core.episode.runner.run_episode``).

Action ``run_episode`` (captain_interfaces/action/RunEpisode):

* goal: ``task`` (``libero_spatial/0``, ``tabletop/cube_on_plate``; empty with an
  ``instruction`` on a real robot), ``init_state``, ``policy`` (``teacher``, ``openai``,
  ``replay``, a registered name or ``module:factory``; empty: ``default_policy``),
  ``base_url`` / ``model`` for model policies, and ``settings_json``: an object with
  any of ``policy_options`` (dict), ``seed``, ``max_requests``, ``max_physical_actions``,
  ``max_wall_time_s``, ``cell_timeout_s``, ``record_snapshots``, ``mcap``, ``subset``;
* feedback after every request: its index and the receipts of its robot calls; the same
  request, its cells and receipts also go out on ``captain/requests``, ``captain/cells``
  and ``captain/receipts`` (``episode_topics``), which ``captain bringup --record`` records;
* result: the outcome label, host and strict success, requests, physical actions, the
  episode's record path (``rows.jsonl``) and the whole outcome as JSON. A goal that cannot
  run (settings that are not JSON, unknown settings, a budget or timeout that is not
  positive, ...) is accepted and aborted at once with outcome ``rejected`` and the reason
  in ``summary_json`` (``{"error": ...}``), so the client reads why; nothing runs. A goal
  with neither task nor instruction is a client's connection probe and is rejected in
  the goal callback, as is a second goal while an episode runs (logged).

With ``robot: ros`` (the stacks' setting) the episode runs against the harness node's
robot through the ROS robot client (``ros_robot_client.ros_backend``): the harness
resets its scene for the task, every ``robot.<call>`` of the session travels as an
action goal or service call, and host success and the privileged snapshot come from the
harness's ``episode/host_state``. With ``robot: in_process`` the runner builds its own
robot per episode, as headless rollouts do. One episode runs at a time; cancelling a
goal cancels the running motion (the arm holds) and ends the episode before its next
request.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node

from captain_harness.core.budget import BudgetLimits
from captain_harness.core.episode.errors import PolicyError
from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest
from captain_harness.nodes import diagnostics as diag
from captain_harness.nodes.episode_runner_params import SCHEMA
from captain_harness.nodes.episode_topics import EpisodeTopics
from captain_harness.nodes.ros_params import declare_schema
from captain_interfaces.action import RunEpisode

SETTINGS = ("policy_options", "seed", "max_requests", "max_physical_actions", "max_wall_time_s", "cell_timeout_s",
            "record_snapshots", "mcap", "subset")


class CancellablePolicy(PolicyClient):
    """A policy that stops the episode at its next request once ``cancel`` is set."""

    def __init__(self, inner: PolicyClient, cancel: threading.Event) -> None:
        self.inner = inner
        self.cancel = cancel
        self.name = inner.name
        self.wants_host_context = inner.wants_host_context
        if hasattr(inner, "config"):
            self.config = inner.config

    def act(self, request: PolicyRequest) -> PolicyReply:
        if self.cancel.is_set():
            raise PolicyError("the episode was cancelled by its action client")
        return self.inner.act(request)

    def close(self) -> None:
        self.inner.close()


class EpisodeRunnerNode(Node):
    """The episode runner node (see the module docstring).

    Args:
        node_name: the node's name (its key in the parameter files).
        **kwargs: passed to ``rclpy.node.Node``.
    """

    #: threads of its MultiThreadedExecutor (``hosting.make_executor``): an episode blocks
    #: one thread for its whole length while goal, cancel and diagnostics callbacks run.
    executor_threads = 2

    def __init__(self, node_name: str = "episode_runner", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.params = declare_schema(self, SCHEMA)
        self._lock = threading.Lock()
        self._active: str | None = None
        self._cancel = threading.Event()
        self._last: dict[str, Any] = {}
        self._client: Any = None
        self._client_lock = threading.Lock()
        group = ReentrantCallbackGroup()
        self._server = ActionServer(self, RunEpisode, "run_episode", execute_callback=self._execute,
                                    goal_callback=self._on_goal, cancel_callback=self._on_cancel,
                                    callback_group=group)
        self._diagnostics = diag.DiagnosticsPublisher(self, self._statuses, self.params["diagnostics_rate_hz"],
                                                      MutuallyExclusiveCallbackGroup())
        self._topics = EpisodeTopics(self)
        self._shut = threading.Event()
        if self.params["robot"] == "ros":
            # the robot client discovers the harness now, not when the first goal comes:
            # discovery and the probes take seconds, which the first episode would wait for
            threading.Thread(target=self._warm_up, name=f"{node_name}_warm_up", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self.robot_client().wait_for_harness(self.params["harness_wait_s"])
        except Exception as exc:  # the first episode looks the harness up again and says why
            self.get_logger().debug(f"robot client warm-up: {type(exc).__name__}: {exc}")

    @property
    def ready(self) -> bool:
        """The action server is up (the harness is looked up per episode)."""
        return True

    # ------------------------------------------------------------------ robot
    def robot_client(self) -> Any:
        """The ROS robot client to the harness (created on first use)."""
        from captain_harness.nodes.ros_robot_client import RosRobotClient

        with self._client_lock:
            if self._shut.is_set():
                raise RuntimeError("the episode runner is shutting down")
            if self._client is None:
                namespace = self.params["harness_namespace"] or self.get_namespace()
                self._client = RosRobotClient(namespace, call_timeout_s=self.params["call_timeout_s"],
                                              node_name=f"{self.get_name()}_robot_client")
            return self._client

    def shutdown_robot(self) -> None:
        """Stop a running episode's motion and release the robot client."""
        self._cancel.set()
        self._shut.set()
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.halt()
            client.close()

    # ----------------------------------------------------------------- action
    def _on_goal(self, goal: Any) -> GoalResponse:
        if not goal.task and not goal.instruction:
            # a client's connection probe (stack clients send an empty goal): never run
            self.get_logger().debug("rejected an episode goal without task or instruction (a connection probe)")
            return GoalResponse.REJECT
        with self._lock:
            if self._active is not None:
                self.get_logger().warning(f"rejected an episode goal: episode {self._active} is running")
                return GoalResponse.REJECT
            self._active = goal.task or "instruction"
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        self._cancel.set()
        client = self._client
        if client is not None:
            client.halt()
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle: Any) -> Any:
        from captain_harness.core.episode.policy.registry import PolicySpec, make_policy
        from captain_harness.core.episode.runner import run_episode

        goal = goal_handle.request
        self._cancel.clear()
        result = RunEpisode.Result()
        problem = goal_problem(goal)
        if problem:
            # accepted and aborted, so the reason reaches the client in the result
            self.get_logger().warning(f"refused an episode goal: {problem}")
            with self._lock:
                self._active = None
            result.outcome = "rejected"
            result.summary_json = json.dumps({"error": problem})
            goal_handle.abort()
            return result
        try:
            settings = json.loads(goal.settings_json or "{}")
            policy = CancellablePolicy(make_policy(PolicySpec(goal.policy or self.params["default_policy"],
                                                              self._policy_options(goal, settings))), self._cancel)
            factory = None
            if self.params["robot"] == "ros":
                from captain_harness.nodes.ros_robot_client import ros_backend

                client = self.robot_client()
                client.resume()
                if not client.wait_for_harness(self.params["harness_wait_s"]):
                    raise RuntimeError("the harness node is not reachable (describe_robot, episode/reset and the "
                                       "motion actions); start it in the same namespace and ROS_DOMAIN_ID")
                factory = ros_backend(client, "" if goal.task else goal.instruction)
            task = goal.task or _instruction_task(goal.instruction)

            def on_event(event: dict[str, Any]) -> None:
                receipts = [r for c in event.get("cells", []) for r in c.get("receipts", [])]
                goal_handle.publish_feedback(RunEpisode.Feedback(request_index=int(event["request_index"]),
                                                                 last_receipts="\n".join(receipts)))
                self._topics.publish(event)

            outcome = run_episode(task, policy=policy, out_dir=Path(self.params["records_dir"]),
                                  backend_factory=factory, init_state=int(goal.init_state),
                                  seed=settings.get("seed"), config=self._config(settings), on_event=on_event)
            summary = outcome.to_dict()
            result.outcome = outcome.outcome
            result.host_success = bool(outcome.host_success)
            result.strict_success = bool(outcome.strict_success)
            result.requests = int(outcome.requests)
            result.physical_actions = int(outcome.physical_actions)
            result.record_path = str(Path(outcome.record_dir) / "rows.jsonl")
            result.summary_json = json.dumps(summary, default=str)
            self._last = {"outcome": outcome.outcome, "task": task, "record": result.record_path}
        except Exception as exc:
            self.get_logger().error(f"episode failed to run: {type(exc).__name__}: {exc}")
            result.outcome = "infrastructure_failure"
            result.summary_json = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
            self._last = {"outcome": result.outcome, "error": str(exc)}
        finally:
            with self._lock:
                self._active = None
        if self._cancel.is_set() and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif result.outcome != "infrastructure_failure":
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _policy_options(self, goal: Any, settings: dict[str, Any]) -> dict[str, Any]:
        options = dict(settings.get("policy_options") or {})
        if goal.base_url:
            options.setdefault("base_url", goal.base_url)
        if goal.model:
            options.setdefault("model", goal.model)
        return options

    def _config(self, settings: dict[str, Any]) -> Any:
        from captain_harness.core.episode.loop import LoopConfig
        from captain_harness.core.episode.runner import EpisodeConfig
        from captain_harness.core.episode.sandbox import SandboxConfig

        p = {**self.params, **{k: v for k, v in settings.items() if k in SETTINGS}}
        return EpisodeConfig(
            limits=BudgetLimits(int(p["max_requests"]), int(p["max_physical_actions"]), float(p["max_wall_time_s"])),
            loop=LoopConfig(cell_timeout_s=float(p["cell_timeout_s"]),
                            record_snapshots=bool(settings.get("record_snapshots", False))),
            sandbox=SandboxConfig(isolation=self.params["isolation"]),
            mcap=bool(settings.get("mcap", False)),
            subset=str(settings.get("subset", "rollout")),
        )

    def _statuses(self) -> list[Any]:
        with self._lock:
            active = self._active
        values = {"active_episode": active or "none", "robot": self.params["robot"],
                  **{f"last_{k}": v for k, v in self._last.items()}}
        return [diag.status(f"{self.get_fully_qualified_name()}: episodes", diag.OK,
                            f"running {active}" if active else "idle", values)]


#: settings_json keys that must be positive numbers (budgets, s) and their kinds
_POSITIVE = {"max_requests": int, "max_physical_actions": int, "max_wall_time_s": float, "cell_timeout_s": float}


def goal_problem(goal: Any) -> str:
    """Why an episode goal cannot run (``""`` when it can): the task or instruction, and
    ``settings_json``: a JSON object of known keys, budgets and timeouts positive numbers
    (``max_requests``/``max_physical_actions`` integers, ``max_wall_time_s``/``cell_timeout_s``
    seconds), ``seed`` an integer, ``policy_options`` an object, ``record_snapshots``/``mcap``
    booleans, ``subset`` a string."""
    if not goal.task and not goal.instruction:
        return "give a task (e.g. libero_spatial/0) or an instruction"
    try:
        settings = json.loads(goal.settings_json or "{}")
    except ValueError as exc:
        return f"settings_json is not JSON: {exc}"
    if not isinstance(settings, dict):
        return "settings_json must be a JSON object"
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        return f"unknown settings {unknown}; known: {', '.join(SETTINGS)}"
    for key, kind in _POSITIVE.items():
        if key not in settings:
            continue
        value = settings[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and value != int(value)):
            return f"{key} must be {'an integer' if kind is int else 'a number'}, got {value!r}"
        if not value > 0:
            return f"{key} must be positive, got {value!r}"
    if "seed" in settings and settings["seed"] is not None and (
            isinstance(settings["seed"], bool) or not isinstance(settings["seed"], int)):
        return f"seed must be an integer, got {settings['seed']!r}"
    if not isinstance(settings.get("policy_options", {}), dict):
        return f"policy_options must be an object, got {settings['policy_options']!r}"
    for key in ("record_snapshots", "mcap"):
        if not isinstance(settings.get(key, False), bool):
            return f"{key} must be true or false, got {settings[key]!r}"
    if not isinstance(settings.get("subset", ""), str):
        return f"subset must be a string, got {settings['subset']!r}"
    return ""


def _instruction_task(instruction: str) -> str:
    """A real robot's episode is named ``robot/<instruction>`` (the task the runner records)."""
    safe = "".join(c if c.isalnum() else "_" for c in instruction.strip().lower())[:60].strip("_")
    return f"robot/{safe or 'instruction'}"


def main(args: list[str] | None = None) -> int:
    """Console entry point ``episode_runner_node``."""
    from captain_harness.nodes.hosting import run_nodes

    return run_nodes([EpisodeRunnerNode], args)


if __name__ == "__main__":
    raise SystemExit(main())
