"""``perception_node``: the perception and measurement calls as ROS 2 services.

One service per call, ``perception/<call>`` and ``measurement/<call>`` (e.g.
``perception/observe``, ``perception/mark_point``,
``measurement/measure_object_geometry``), of type captain_interfaces/srv/RobotCall
(``args_json = {"args": [...], "kwargs": {...}}``; ``name`` may be left empty). The
calls are those the harness describes (``describe_robot``), so the services follow
whatever perception the harness's robot API has.

Where the calls run: in the harness node's one ``RobotAPI``, reached through its
``robot_call`` service. Perception shares state with the other calls (observation
handles and detection ids are used by measurement, planning and motion calls, frames
come from the driver the harness owns), so answering them anywhere else would split
that state; this way a perception call returns the same result dict and receipt over
ROS as in-process. The node adds one local service hop (about a millisecond).

The node also owns the segmentation and pointing backends and serves them to the
harnesses' remote perception clients (``serve``; see
``captain_perception.nodes.perception_server``): one node answers several harnesses
(namespaces, RL workers) through one bounded queue.

Managed node (``rclpy.lifecycle``: the standard ``lifecycle_msgs`` services
``perception/get_state``, ``perception/change_state``, ... and
``perception/transition_event``), like the harness node:

* ``configure``: build the backends (segmenter, pointing client, request queue) and their
  action and services, and start asking the harness for its calls (``proxy``);
* ``activate``: serve: requests run and proxied calls are forwarded;
* ``deactivate``: every interface stays, and a new request (a ``perception/perceive`` goal,
  a ``perception/perceive_frame`` call, a proxied ``perception/<call>`` or
  ``measurement/<call>``) answers ``not_available`` saying the node is inactive; requests
  already running finish;
* ``cleanup`` and ``shutdown``: release the backends (their workers stop, the action and
  services go; ``configure`` builds fresh ones).

With ``autostart`` (default) the node takes itself through ``configure`` and ``activate``
as it starts (nav2's lifecycle manager's ``autostart``), so ``captain bringup`` and the
launch files get an active node as before; ``autostart:=false`` leaves it unconfigured
for a lifecycle manager. ``ready`` (the READY line) means active and, with ``proxy``, the
harness's calls discovered.

Parameters: ``captain_perception.nodes.perception_params.SCHEMA``, and ROS's
``use_sim_time`` (the node's clock, and so the diagnostics stamps, follow ``/clock``; its
timers run on a steady clock, so discovery and diagnostics go on while simulated time
stands still or before the first ``/clock`` message).
"""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt
from captain_harness.nodes import diagnostics as diag
from captain_harness.nodes.messages import result_msg
from captain_harness.nodes.ros_params import declare_schema
from captain_interfaces.srv import DescribeRobot, RobotCall
from captain_perception.nodes.perception_params import SCHEMA


class PerceptionNode(LifecycleNode):
    """The perception node (see the module docstring).

    Args:
        node_name: the node's name (its key in the parameter files).
        **kwargs: passed to ``rclpy.lifecycle.LifecycleNode`` (``namespace``,
            ``parameter_overrides``, ``context``, ...).
    """

    #: threads of its MultiThreadedExecutor (captain_harness.nodes.hosting.make_executor): a
    #: forwarded call blocks its thread until the harness answers, and the answer itself
    #: needs a free thread; four let two calls and the diagnostics timer overlap.
    #: (the served backends' requests wait in threads of their own: see perception_server)
    executor_threads = 4

    def __init__(self, node_name: str = "perception", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.params = declare_schema(self, SCHEMA)
        self.serving: Any = None
        ns = self.params["harness_namespace"].rstrip("/")
        self._group = ReentrantCallbackGroup()
        self._harness_call = self.create_client(RobotCall, f"{ns}/robot_call" if ns else "robot_call",
                                                callback_group=self._group)
        self._describe = self.create_client(DescribeRobot, f"{ns}/describe_robot" if ns else "describe_robot",
                                            callback_group=self._group)
        self.served: dict[str, str] = {}
        self._proxied_services: list[Any] = []
        self._discovered = threading.Event()
        self._pending: Any = None  # the describe_robot request in flight, sent at _pending_since (monotonic s)
        self._pending_since = 0.0
        self._calls_answered = 0
        self._discovery: Any = None
        self._transition_lock = threading.RLock()
        self._diagnostics = diag.DiagnosticsPublisher(self, self._statuses, self.params["diagnostics_rate_hz"],
                                                      MutuallyExclusiveCallbackGroup())
        if self.params["autostart"]:
            self._autostart()

    # ------------------------------------------------------------------ lifecycle
    @property
    def node_state(self) -> str:
        """The node's lifecycle state label (unconfigured, inactive, active, finalized, ...)."""
        return str(self._state_machine.current_state[1])

    @property
    def ready(self) -> bool:
        """True once the node is active and (``proxy``) the harness has described its calls."""
        return self.node_state == "active" and self._discovered.is_set()

    def refusal(self) -> str:
        """Why a new request is refused now ("" while the node is active)."""
        state = self.node_state
        if state == "active":
            return ""
        return (f"the perception node {self.get_fully_qualified_name()} is {state}; it answers requests once "
                "active (lifecycle_msgs ChangeState activate)")

    def _autostart(self) -> None:
        """``configure`` then ``activate`` (both fast: model backends load on first use)."""
        with self._transition_lock:
            if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error("the perception node failed to configure; it stays unconfigured "
                                        "(fix the cause, then configure and activate it over lifecycle_msgs)")
                return
            if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error("the perception node failed to activate; it stays inactive")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Build the served backends and start discovering the harness's calls."""
        try:
            if self.params["serve"]:
                from captain_perception.nodes.perception_server import PerceptionServing, server_from_params

                cameras = [c.strip() for c in self.params["frame_cameras"].split(",") if c.strip()]
                self.serving = PerceptionServing(self, server_from_params(self.params), refusal=self.refusal,
                                                 frame_cameras=cameras,
                                                 frame_prefix=self.params["harness_namespace"].rstrip("/"),
                                                 frame_ring_size=self.params["frame_ring_size"])
        except Exception as exc:
            self.get_logger().error(f"building the perception backends failed: {exc}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        if self.params["proxy"]:
            # a steady clock, not the node's: with use_sim_time the node clock stands still
            # until /clock ticks (and while a simulator is paused), and discovery must not
            # wait for it (the harness publishing /clock may be the node being discovered)
            self._discovery = self.create_timer(self.params["discovery_period_s"], self._discover,
                                                callback_group=MutuallyExclusiveCallbackGroup(),
                                                clock=Clock(clock_type=ClockType.STEADY_TIME))
        else:
            self._discovered.set()
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Serve: requests run and proxied calls are forwarded."""
        self.get_logger().info("perception node active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Refuse new requests (``not_available``, saying the node is inactive)."""
        self.get_logger().info("perception node inactive: new requests are refused")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Release the backends (``configure`` builds fresh ones)."""
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Release the backends."""
        self._release()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: release the backends, go back to unconfigured."""
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        """Stop the served backends' workers, remove their interfaces and the proxied services."""
        if self._discovery is not None:
            self.destroy_timer(self._discovery)
            self._discovery = None
        if self.serving is not None:
            self.serving.destroy()
            self.serving = None
        for service in self._proxied_services:
            self.destroy_service(service)
        self._proxied_services.clear()
        self.served.clear()
        self._pending = None
        self._discovered.clear()

    def _discover(self) -> None:
        """Discovery timer: ask the harness for its calls; a request unanswered for
        ``describe_timeout_s`` is dropped and asked again (rmw gives up sending a response
        when the client's response reader is not discovered yet, and says so only in the
        harness's log)."""
        if self._discovered.is_set() or not self._describe.service_is_ready():
            return
        now = time.monotonic()
        if self._pending is not None:
            waited = now - self._pending_since
            if waited < self.params["describe_timeout_s"]:
                return
            self._describe.remove_pending_request(self._pending)
            self._pending = None
            self.get_logger().warning(f"describe_robot unanswered after {waited:.1f} s; asking the harness again")
        self._pending_since = now
        self._pending = future = self._describe.call_async(DescribeRobot.Request())
        future.add_done_callback(self._on_described)

    def _on_described(self, future: Any) -> None:
        if future is not self._pending:
            return  # given up already (see _discover)
        self._pending = None
        try:
            calls = json.loads(future.result().calls_json or "[]")
        except Exception as exc:
            self.get_logger().warning(f"describe_robot failed: {exc}", throttle_duration_sec=5.0)
            return
        if not calls or self._discovery is None:
            return  # the harness's driver is still starting, or the node was cleaned up meanwhile
        groups = set(self.params["groups"])
        for entry in calls:
            if entry.get("group") in groups and not entry.get("physical") and entry["name"] not in self.served:
                service = f"{entry['group']}/{entry['name']}"
                self._proxied_services.append(self.create_service(
                    RobotCall, service, partial(self._on_call, entry["name"]), callback_group=self._group))
                self.served[entry["name"]] = service
        self._discovered.set()
        self._discovery.cancel()
        if self.served:
            self.get_logger().info(f"serving {len(self.served)} calls: {', '.join(sorted(self.served.values()))}")
        else:
            self.get_logger().warning(f"the harness's robot API has no calls in groups {sorted(groups)}; "
                                      "no perception services")

    def _on_call(self, name: str, request: Any, response: Any) -> Any:
        if request.name and request.name != name:
            result = fail(FailureCategory.INVALID_ARGUMENT,
                          f"this service answers {name}; leave name empty or call the {request.name} service")
            response.result = result_msg(CallOutcome(result, format_receipt(name, result)))
            return response
        refused = self.refusal()
        if refused:
            result = fail(FailureCategory.NOT_AVAILABLE, f"{name}: {refused}")
            response.result = result_msg(CallOutcome(result, format_receipt(name, result)))
            return response
        done = threading.Event()
        future = self._harness_call.call_async(RobotCall.Request(name=name, args_json=request.args_json))
        future.add_done_callback(lambda _: done.set())
        if not done.wait(self.params["call_timeout_s"]) or future.result() is None:
            result = fail(FailureCategory.NOT_AVAILABLE,
                          f"{name}: the harness did not answer within {self.params['call_timeout_s']:g} s")
            response.result = result_msg(CallOutcome(result, format_receipt(name, result)))
            return response
        self._calls_answered += 1
        response.result = future.result().result
        return response

    def _statuses(self) -> list[Any]:
        reachable = self._harness_call.service_is_ready() or not self.params["proxy"]
        level = diag.OK if reachable and self.ready else diag.WARN
        message = "serving" if self.ready else "waiting for the harness to describe its calls"
        if not reachable:
            message = "the harness's robot_call service is not reachable"
        if self.node_state != "active":
            message = f"{self.node_state}: requests are refused"
        values = {"lifecycle_state": self.node_state, "harness_reachable": reachable, "services": len(self.served),
                  "calls_answered": self._calls_answered}
        statuses = [diag.status(f"{self.get_fully_qualified_name()}: perception", level, message, values)]
        serving = self.serving  # a local: a cleanup in another thread may drop it meanwhile
        if serving is not None:
            described = serving.server.describe()
            segmenter = (described.get("segmenter") or {}).get("backend", "none")
            flat = {k: v for k, v in described.items() if isinstance(v, (int, float, str, bool))}
            statuses.append(diag.status(f"{self.get_fully_qualified_name()}: perception server", diag.OK,
                                        f"serving segmenter {segmenter}", flat))
        return statuses

    def close(self) -> None:
        """Stop the served backends' workers."""
        with self._transition_lock:
            self._release()


def main(args: list[str] | None = None) -> int:
    """Console entry point ``perception_node``."""
    from captain_harness.nodes.hosting import run_nodes
    from captain_perception.nodes.dds_profile import use_profile

    use_profile()  # before the process's first participant (see dds_profile)
    return run_nodes([PerceptionNode], args)


if __name__ == "__main__":
    raise SystemExit(main())
