"""The session's ``robot`` calls over ROS 2: a ``RobotAPI`` whose calls are answered by
the harness node.

``RosRobotClient`` sends physical primitives (``move_to``, ``hold``, ``recover``,
``release``) as goals of the harness's actions, with the policy's own keyword arguments
in ``args_json``, and every other call to the ``robot_call`` service. Results come back
as ``RobotCallResult`` whose ``result_json`` is the harness API's result dict, intact,
with its receipt. ``remote_api(client)`` builds a local ``RobotAPI`` with one proxy per
call the harness describes (same names, signatures and docstrings): it binds arguments,
keeps the episode's budget and call log (read by the completion gate) exactly as the
in-process API does, so the same call on the same state returns the same result dict
and receipt either way. ``ros_backend(client)`` is the episode backend factory over it.

The client owns a private rclpy context, node and executor thread (no signal handlers),
so it works in any process and from inside another node's callbacks. Nothing raises at
the policy boundary: an unreachable harness or a timeout becomes a failed result dict.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from captain_backends.core.driver import TaskInfo
from captain_harness.core.api import RobotAPI
from captain_harness.core.budget import Budget
from captain_harness.core.episode.channel import to_jsonable
from captain_harness.core.errors import HarnessError
from captain_harness.core.host.call_specs import register_proxies, signature_of
from captain_harness.core.host.robot_host import task_from_json
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt
from captain_harness.nodes.messages import MOTION_ACTIONS, PROBE_ARGS_JSON, outcome_from_msg

#: Probes that the harness answers without side effects (see ``wait_for_harness``).
PROBE_INIT_STATE = -2


class RobotClientError(HarnessError):
    """The harness node cannot be reached, or refused an episode request."""

    def __init__(self, message: str) -> None:
        super().__init__(message, FailureCategory.NOT_AVAILABLE)


@dataclass
class RemoteEpisodeStart:
    """The harness's answer to an episode reset."""

    task: TaskInfo
    initial_images: list[str]


class RosRobotClient:
    """Robot calls to a harness node (see the module docstring).

    Args:
        namespace: the harness's namespace ("" or e.g. "/robot1").
        call_timeout_s: longest wait for one call's result (motions included).
        node_name: name of the client's own node.
    """

    def __init__(self, namespace: str = "", *, call_timeout_s: float = 600.0,
                 node_name: str = "captain_robot_client") -> None:
        from rclpy.action import ActionClient

        from captain_interfaces.action import Hold, MoveTo, Recover, Release
        from captain_interfaces.srv import DescribeRobot, HostState, ResetEpisode, RobotCall

        self.call_timeout_s = float(call_timeout_s)
        from captain_harness.nodes.private_node import PrivateNode

        self._private = PrivateNode(node_name, namespace)
        self.node = self._private.node
        self._types = {"move_to": MoveTo, "hold": Hold, "recover": Recover, "release": Release}
        self._actions = {name: ActionClient(self.node, self._types[name], name) for name in MOTION_ACTIONS}
        self._robot_call = self.node.create_client(RobotCall, "robot_call")
        self._describe = self.node.create_client(DescribeRobot, "describe_robot")
        self._reset = self.node.create_client(ResetEpisode, "episode/reset")
        self._host_state = self.node.create_client(HostState, "episode/host_state")
        self._RobotCall, self._DescribeRobot = RobotCall, DescribeRobot
        self._ResetEpisode, self._HostState = ResetEpisode, HostState
        self._signatures: dict[str, inspect.Signature] = {}
        self._goal_lock = threading.Lock()
        self._goal_handle: Any = None
        self._halted = threading.Event()
        self._closed = threading.Event()
        self._private.start()

    def _wait(self, future: Any, timeout_s: float) -> Any:
        """The future's result. Polled (every 0.1 ms for the first 50 ms, then less and
        less often, up to every 5 ms) rather than through a done callback, which rclpy
        would run as one more executor task: that extra wake-up costs about a millisecond
        per round trip."""
        start = time.monotonic()
        deadline = start + timeout_s
        pause = 1e-4
        while not future.done():
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"no answer within {timeout_s:g} s")
            if self._closed.is_set():
                raise RobotClientError("the robot client was closed while waiting for the harness")
            time.sleep(pause)
            if now - start > 0.05:
                pause = min(pause * 1.2, 5e-3)
        return future.result()

    # -------------------------------------------------------------- connection
    def wait_for_harness(self, timeout_s: float = 30.0) -> bool:
        """True once the harness's services and actions are discovered and have each
        answered a probe.

        Discovery is not symmetric: a client may see a server before the server has
        matched the client's reply reader, and a reply sent in that window is lost. So
        every service gets a request without side effects (``describe_robot``,
        ``episode/host_state``, an ``episode/reset`` with an invalid initial state, a
        ``robot_call`` without a name) and every action a goal it rejects, resent until
        answered."""
        deadline = time.monotonic() + timeout_s
        for client in (self._describe, self._robot_call, self._reset, self._host_state):
            if not client.wait_for_service(timeout_sec=max(0.0, deadline - time.monotonic())):
                return False
        if not all(a.wait_for_server(timeout_sec=max(0.0, deadline - time.monotonic()))
                   for a in self._actions.values()):
            return False
        probes = [(self._describe.call_async, self._DescribeRobot.Request()),
                  (self._host_state.call_async, self._HostState.Request()),
                  (self._reset.call_async, self._ResetEpisode.Request(init_state=PROBE_INIT_STATE)),
                  (self._robot_call.call_async, self._RobotCall.Request(name=""))]
        probes += [(action.send_goal_async, self._types[name].Goal(args_json=PROBE_ARGS_JSON))
                   for name, action in self._actions.items()]
        return all(self._answered(send, request, deadline) for send, request in probes)

    def _answered(self, send: Any, request: Any, deadline: float) -> bool:
        while time.monotonic() < deadline:
            try:
                self._wait(send(request), min(2.0, max(0.05, deadline - time.monotonic())))
                return True
            except TimeoutError:
                continue
        return False

    def _service(self, client: Any, request: Any, timeout_s: float, retry_s: float | None = None) -> Any:
        """The response to ``request``; an idempotent request (``retry_s`` set) is resent
        every ``retry_s`` until ``timeout_s``.

        Raises:
            RobotClientError: the service is not available.
            TimeoutError: no answer in time.
        """
        if not client.service_is_ready() and not client.wait_for_service(timeout_sec=min(timeout_s, 10.0)):
            raise RobotClientError(f"the harness service {client.srv_name} is not available; is the harness "
                                   "node running in this namespace and ROS_DOMAIN_ID?")
        deadline = time.monotonic() + timeout_s
        while True:
            future = client.call_async(request)
            left = deadline - time.monotonic()
            try:
                return self._wait(future, left if retry_s is None else max(0.0, min(retry_s, left)))
            except TimeoutError:
                client.remove_pending_request(future)
                if retry_s is None or time.monotonic() >= deadline:
                    raise

    def describe(self) -> dict[str, Any]:
        """``robot``, ``driver``, ``names`` and ``calls`` of the harness's API.

        Raises:
            RobotClientError: the harness is not reachable.
        """
        try:
            response = self._service(self._describe, self._DescribeRobot.Request(), 30.0, retry_s=3.0)
        except TimeoutError as exc:
            raise RobotClientError(f"describe_robot: {exc}") from exc
        calls = json.loads(response.calls_json or "[]")
        if not calls:
            raise RobotClientError("the harness serves no robot calls yet (its driver is still starting)")
        self._signatures = {c["name"]: signature_of(c) for c in calls}
        return {"robot": response.robot, "driver": response.driver, "names": list(response.names),
                "calls": calls}

    # ------------------------------------------------------------------- calls
    def call(self, name: str, args: tuple | list = (), kwargs: dict[str, Any] | None = None) -> CallOutcome:
        """One robot call; never raises (failures become result dicts)."""
        kwargs = dict(kwargs or {})
        try:
            if name in self._actions:
                return self._call_action(name, tuple(args), kwargs)
            return self._call_service(name, list(args), kwargs)
        except (RobotClientError, TimeoutError, ValueError, TypeError) as exc:
            category = (FailureCategory.INVALID_ARGUMENT if isinstance(exc, (ValueError, TypeError))
                        else FailureCategory.NOT_AVAILABLE)
            result = fail(category, f"{name}: the harness did not answer over ROS ({exc})")
            return CallOutcome(result, format_receipt(name, result))

    def _call_service(self, name: str, args: list, kwargs: dict[str, Any]) -> CallOutcome:
        request = self._RobotCall.Request(
            name=name, args_json=json.dumps({"args": to_jsonable(args), "kwargs": to_jsonable(kwargs)}))
        response = self._service(self._robot_call, request, self.call_timeout_s)
        return outcome_from_msg(name, response.result)

    def _call_action(self, name: str, args: tuple, kwargs: dict[str, Any]) -> CallOutcome:
        signature = self._signatures.get(name)
        if args:
            if signature is None:
                raise ValueError(f"{name}() takes keyword arguments over ROS")
            kwargs = dict(signature.bind(*args, **kwargs).arguments)
        if self._halted.is_set():
            return self._halted_outcome(name)
        client = self._actions[name]
        if not client.server_is_ready() and not client.wait_for_server(timeout_sec=10.0):
            raise RobotClientError(f"the harness action {name} is not available")
        goal = self._types[name].Goal(args_json=json.dumps(to_jsonable(kwargs)))
        handle = self._wait(client.send_goal_async(goal), 30.0)
        if not handle.accepted:
            result = fail(FailureCategory.CONTROLLER_REJECTED,
                          f"{name}: the harness refused the goal (another motion is running, or the driver "
                          "is not active); wait for the running motion or cancel it")
            return CallOutcome(result, format_receipt(name, result))
        with self._goal_lock:
            self._goal_handle = handle
        if self._halted.is_set():
            handle.cancel_goal_async()
        try:
            response = self._wait(handle.get_result_async(), self.call_timeout_s)
        finally:
            with self._goal_lock:
                self._goal_handle = None
        return outcome_from_msg(name, response.result.result)

    @staticmethod
    def _halted_outcome(name: str) -> CallOutcome:
        result = fail(FailureCategory.CANCELLED, f"{name}: the episode was cancelled; nothing moves any more")
        return CallOutcome(result, format_receipt(name, result))

    def cancel_motion(self) -> bool:
        """Ask the harness to cancel the running motion goal (it holds); False if none."""
        with self._goal_lock:
            handle = self._goal_handle
        if handle is None:
            return False
        handle.cancel_goal_async()
        return True

    def halt(self) -> None:
        """Cancel the running motion and refuse further motions (a result dict with
        ``cancelled``) until ``resume``: a cancelled episode's remaining calls do not move."""
        self._halted.set()
        self.cancel_motion()

    def resume(self) -> None:
        """Accept motions again after ``halt``."""
        self._halted.clear()

    # ---------------------------------------------------------------- episodes
    def reset_episode(self, task: str, init_state: int = -1, seed: int | None = None,
                      workspace: str = "", timeout_s: float = 300.0) -> RemoteEpisodeStart:
        """Start an episode on the harness's robot.

        Raises:
            RobotClientError: unreachable harness or a refused reset (its message says why).
        """
        request = self._ResetEpisode.Request(task=task, init_state=int(init_state),
                                             seed=-1 if seed is None else int(seed), workspace=str(workspace))
        try:
            response = self._service(self._reset, request, timeout_s)
        except TimeoutError as exc:
            raise RobotClientError(f"episode/reset: {exc}") from exc
        if not response.success:
            raise RobotClientError(f"the harness could not start the episode: {response.message}")
        return RemoteEpisodeStart(task_from_json(response.task_json), list(response.initial_images))

    def host_state(self, include_snapshot: bool = False) -> dict[str, Any]:
        """``available``, ``success`` and ``snapshot`` (a dict, when asked).

        Raises:
            RobotClientError: unreachable harness.
        """
        try:
            response = self._service(self._host_state, self._HostState.Request(include_snapshot=include_snapshot),
                                     60.0, retry_s=5.0)
        except TimeoutError as exc:
            raise RobotClientError(f"episode/host_state: {exc}") from exc
        snapshot = json.loads(response.snapshot_json) if response.snapshot_json else None
        return {"available": response.available, "success": response.success, "snapshot": snapshot,
                "message": response.message}

    def close(self) -> None:
        """Stop the executor thread and release the context (pending calls end with a
        failed result)."""
        self._closed.set()
        self._private.close()


def remote_api(client: RosRobotClient, budget: Budget | None = None) -> RobotAPI:
    """A local ``RobotAPI`` whose calls are answered by the harness node over ROS; it keeps
    ``budget`` (default: the paper's episode budget) and the call log, as the in-process
    API does."""
    api = RobotAPI(budget=budget or Budget())
    register_proxies(api, client.describe()["calls"], client.call)
    return api


def _snapshot(data: dict[str, Any] | None) -> Any:
    if data is None:
        return None
    from captain_backends.core.snapshot import SimSnapshot

    try:
        return SimSnapshot.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return data


def ros_backend(client: RosRobotClient, instruction: str = ""):
    """An episode backend factory (``captain_harness.core.episode.backend``) whose robot is
    the harness node's, reached over ROS through ``client``. With an ``instruction`` (a
    real robot) the harness keeps its scene and the episode's task is that instruction."""
    from dataclasses import replace

    from captain_harness.core.episode.backend import Backend, BackendRequest

    def factory(request: BackendRequest) -> Backend:
        start = client.reset_episode("" if instruction else request.task, request.init_state, request.seed,
                                     str(request.workspace))
        if instruction:
            start.task = replace(start.task, task_id=request.task, instruction=instruction)
        api = remote_api(client)
        privileged = client.host_state(False)["available"]
        images = list(start.initial_images)
        return Backend(
            api=api,
            task=start.task,
            check_success=(lambda: bool(client.host_state(False)["success"])) if privileged else None,
            host_context=(lambda: _snapshot(client.host_state(True)["snapshot"])) if privileged else None,
            initial_images=None if "observe" in api.specs else (lambda: images),
        )

    return factory
