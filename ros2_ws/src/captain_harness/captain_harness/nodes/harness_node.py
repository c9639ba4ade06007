"""``harness_node``: the harness's robot API over ROS 2 (thin over ``RobotHost``).

Actions (relative names, so the stack can be namespaced), each following the shape of
nav2's behaviours: the goal callback validates the message cheaply (a malformed goal:
a non-finite number, a vector of the wrong length, an unknown mode or gripper command,
``args_json`` that is not an object, ends at once ABORTED with ``invalid_argument`` and
the reason in its result; nothing runs) and rejects a second concurrent motion goal or
any goal while the node is not active (one active motion goal under a lock); the primitive then
prechecks once (arguments, IK, collisions, workspace), runs its fixed-rate control
cycle with the force guards and sends feedback; a cancel request makes the primitive
hold the arm and the goal ends CANCELED with ``stopped_reason="cancelled"``:

* ``move_to`` (captain_interfaces/action/MoveTo), feedback: progress, TCP pose, force;
* ``hold``, ``recover``, ``release`` (Hold, Recover, Release).

A result always carries the call's whole result dict and receipt (``RobotCallResult``);
the goal SUCCEEDS when the call succeeded, is ABORTED when it failed, CANCELED when
cancelled.

Services:

* ``robot_call`` (RobotCall): any non-physical call by name (perception, measurement,
  planning, state), with ``args_json = {"args": [...], "kwargs": {...}}``;
* ``planning/<call>`` and ``state/<call>`` (RobotCall): the same, one service per call;
* ``describe_robot`` (DescribeRobot): names, signatures and docstrings of every call;
* ``recover_driver`` (RecoverDriver): clear a latched driver fault as ros2_control does
  (cancel any motion, deactivate, activate; activation refuses while the readings are
  stale or beyond the emergency limits and says so). The process and the driver object
  stay: nothing is restarted or rebuilt;
* ``episode/reset`` (ResetEpisode) and ``episode/host_state`` (HostState): episode
  control and privileged simulator state for the host side (the episode runner).

Topics published (sim drivers; rates 0 switch them off, e.g. for a real robot whose own
drivers publish them): ``joint_states`` (sensor_msgs/JointState: the arm joints and a
``gripper_opening`` joint in m), ``wrench`` (geometry_msgs/WrenchStamped, contact wrench
on the tool in the base frame), and per camera ``<camera>/color/image_raw`` (rgb8),
``<camera>/aligned_depth_to_color/image_raw`` (32FC1 m or 16UC1 mm) and
``<camera>/color/camera_info`` (rendered only while someone subscribes);
``diagnostics``.

Parameters: ``captain_harness.nodes.harness_params.SCHEMA``, and ROS's ``use_sim_time``
(the sim stack sets it: the node clock, and so the diagnostics stamps, follow the
``/clock`` the node publishes for a simulated driver; every timer of the node runs on a
steady clock, so topics and diagnostics keep coming while simulated time stands still). All calls go through one
``RobotAPI``; callbacks run in a re-entrant group on a multi-threaded executor of
``executor_threads`` threads (a motion goal blocks a thread for its whole duration while
cancel requests, feedback, state services, sensor timers and diagnostics must still run).

Managed node (``rclpy.lifecycle``, the standard ``lifecycle_msgs`` services
``harness/change_state``, ``harness/get_state``, ... and ``harness/transition_event``),
its transitions driving the driver's lifecycle as ros2_control's controller manager
drives hardware:

* ``configure``: build the driver, configure it (states readable) and build the robot
  API (kinematic and collision models, perception); the driver stays inactive;
* ``activate``: activate the driver (refused while, e.g., the XR1 driver's readings are
  stale: the node stays inactive and the log says why);
* ``deactivate``: stop a running motion, hold, deactivate the driver;
* ``cleanup``: shut the driver down (``configure`` builds a fresh one); ``shutdown``.

The node takes itself through ``configure`` and ``activate`` at start (nav2's
lifecycle manager's ``autostart``), retrying ``configure`` every
``driver_retry_period_s`` while the robot is unreachable. A latched driver fault is
cleared by ``deactivate`` then ``activate`` over ``lifecycle_msgs/srv/ChangeState``, or
in one call by ``recover_driver``. Goals are refused unless the node is active.
Diagnostics report the node's and the driver's lifecycle states, a latched fault
(ERROR), and staleness of an idle arm (WARN: the XR1 driver's watchdog judges staleness
only while commands stream).
"""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from typing import Any

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from captain_backends.core.driver import LifecycleState as DriverState
from captain_harness.core.host.robot_host import HostError, HostSettings, RobotHost, task_json
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt
from captain_harness.nodes import diagnostics as diag
from captain_harness.nodes.harness_params import SCHEMA, motion_config
from captain_harness.nodes.messages import (
    MOTION_ACTIONS,
    PROBE_ARGS_JSON,
    call_args,
    goal_kwargs,
    goal_problem,
    pose_msg,
    result_msg,
)
from captain_harness.nodes.periodic import PeriodicCalls
from captain_harness.nodes.robot_state_publisher import RobotStatePublisher
from captain_harness.nodes.ros_params import declare_schema
from captain_harness.nodes.sensor_publishers import SensorPublishers
from captain_interfaces.action import Hold, MoveTo, Recover, Release
from captain_interfaces.srv import DescribeRobot, HostState, RecoverDriver, ResetEpisode, RobotCall

ACTION_TYPES = {"move_to": MoveTo, "hold": Hold, "recover": Recover, "release": Release}
#: Groups whose calls the harness serves one service each (perception and measurement
#: services are the perception node's).
SERVICE_GROUPS = ("planning", "state")


class HarnessNode(LifecycleNode):
    """The harness node (see the module docstring).

    Args:
        node_name: the node's name (its key in the parameter files).
        **kwargs: passed to ``rclpy.lifecycle.LifecycleNode`` (``namespace``,
            ``parameter_overrides``, ``context``, ...).
    """

    #: threads of its MultiThreadedExecutor (``hosting.make_executor``): one for a running
    #: motion goal, one for a cancel or a service call meanwhile, one for the sensor and
    #: diagnostics timers. More only add to rclpy 9.1.2's wake-ups (ros2/rclpy#1452).
    executor_threads = 3

    def __init__(self, node_name: str = "harness", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.params = declare_schema(self, SCHEMA)
        p = self.params
        self.host = RobotHost(HostSettings(
            driver=p["driver"], task=p["task"], init_state=p["init_state"], seed=p["seed"],
            image_size_px=p["image_size_px"], driver_config_path=p["driver_config_path"], sim_speed=p["sim_speed"],
            driver_options=_json_object(p["driver_options_json"], "driver_options_json"),
            namespace=self.get_namespace(), workspace_dir=p["workspace_dir"] or None,
            motion=motion_config(p)))
        self.timing = diag.MotionTiming()
        self._goal_lock = threading.Lock()
        self._active_goal: str | None = None
        self._stop = threading.Event()
        self._group = ReentrantCallbackGroup()
        self._call_services: dict[str, Any] = {}

        self._actions = [
            ActionServer(self, ACTION_TYPES[name], name, execute_callback=partial(self._execute, name),
                         goal_callback=partial(self._on_goal, name), cancel_callback=self._on_cancel,
                         callback_group=self._group)
            for name in MOTION_ACTIONS]
        self.create_service(RobotCall, "robot_call", self._on_robot_call, callback_group=self._group)
        self.create_service(DescribeRobot, "describe_robot", self._on_describe, callback_group=self._group)
        self.create_service(RecoverDriver, "recover_driver", self._on_recover, callback_group=self._group)
        self.create_service(ResetEpisode, "episode/reset", self._on_reset, callback_group=self._group)
        self.create_service(HostState, "episode/host_state", self._on_host_state, callback_group=self._group)

        # /tf, /clock, joint_states and wrench from a thread of their own, not executor
        # timers: every timer tick woke all the executor's threads (``periodic``)
        self._publishing = PeriodicCalls(f"{node_name}_publishing", on_error=self._on_publishing_error)
        self.robot_state = RobotStatePublisher(self, p["tf_rate_hz"], schedule=self._publishing.add)
        self._sensors = SensorPublishers(self, p, schedule=self._publishing.add)
        self._publishing.start()
        self._diagnostics = diag.DiagnosticsPublisher(self, self._diagnostic_statuses, p["diagnostics_rate_hz"],
                                                      MutuallyExclusiveCallbackGroup())
        self._transition_lock = threading.RLock()
        self._starter = threading.Thread(target=self._bring_up, name=f"{node_name}_autostart", daemon=True)
        self._starter.start()

    # ------------------------------------------------------------------ lifecycle
    @property
    def ready(self) -> bool:
        """True once the node (and so the driver) is active and every service is up."""
        return self.node_state == "active" and self.host.ready and bool(self._call_services)

    @property
    def node_state(self) -> str:
        """The node's lifecycle state label (unconfigured, inactive, active, finalized, ...)."""
        return str(self._state_machine.current_state[1])

    def _bring_up(self) -> None:
        """Autostart: ``configure`` (retried until the driver can be built and reached or
        the node stops), then ``activate``."""
        retry_s = self.params["driver_retry_period_s"]
        while not self._stop.is_set():
            with self._transition_lock:
                if self.node_state != "unconfigured":
                    break
                done = self.trigger_configure() == TransitionCallbackReturn.SUCCESS
            if done:
                break
            self.get_logger().error(f"driver {self.params['driver']!r} failed to start: {self.host.last_error}; "
                                    f"retrying in {retry_s:g} s")
            self._stop.wait(retry_s)
        if self._stop.is_set():
            return
        with self._transition_lock:
            if self.node_state == "inactive" and self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error(f"driver {self.params['driver']!r} did not activate: {self.host.last_error}; "
                                        "activate the node (lifecycle_msgs ChangeState) or call recover_driver")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Build and configure the driver and the robot API (the driver stays inactive)."""
        try:
            self.host.configure()
        except Exception:
            return TransitionCallbackReturn.FAILURE
        if not self._call_services:
            self._create_call_services()
        task = self.host.task.task_id if self.host.task is not None else "-"
        self.get_logger().info(f"driver {self.params['driver']!r} configured (task {task}); "
                               f"{len(self.host.api.specs)} robot calls served")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Activate the driver; FAILURE (the node stays inactive) when it refuses."""
        try:
            self.host.activate()
        except Exception as exc:
            self.get_logger().warning(f"driver {self.params['driver']!r} refused to activate: {exc}")
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(f"driver {self.params['driver']!r} active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop any motion, hold, deactivate the driver."""
        try:
            self.host.deactivate()
        except Exception as exc:
            self.get_logger().error(f"deactivating the driver failed: {exc}")
            return TransitionCallbackReturn.ERROR
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Shut the driver down (``configure`` builds a fresh one)."""
        self.host.cleanup()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Hold and shut the driver down."""
        self._stop.set()
        self.host.shutdown()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: hold, shut the driver down, go back to unconfigured."""
        self.host.cleanup()
        return TransitionCallbackReturn.SUCCESS

    def recover(self) -> dict[str, Any]:
        """``deactivate`` then ``activate`` (``recover_driver``): ``success``, ``message``,
        ``cleared_fault``, ``lifecycle_state`` (the driver's, afterwards)."""
        with self._transition_lock:
            state = self.node_state
            fault = self.host.current_fault()
            if state not in ("active", "inactive"):
                why = self.host.last_error or "the driver is still starting"
                return {"success": False, "cleared_fault": "", "lifecycle_state": self._driver_state(),
                        "message": f"the harness is {state}; nothing to recover yet ({why})"}
            if state == "active" and not fault:
                return {"success": True, "cleared_fault": "", "lifecycle_state": self._driver_state(),
                        "message": "the driver is active without a fault; nothing to recover"}
            if state == "active" and self.trigger_deactivate() != TransitionCallbackReturn.SUCCESS:
                return {"success": False, "cleared_fault": "", "lifecycle_state": self._driver_state(),
                        "message": f"deactivating failed: {self.host.last_error}"}
            if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                return {"success": False, "cleared_fault": "", "lifecycle_state": self._driver_state(),
                        "message": f"the driver stays inactive: {self.host.last_error}; fix the cause and call "
                                   "recover_driver (or activate the harness node) again"}
            what = f"cleared {fault!r}" if fault else "activated"
            return {"success": True, "cleared_fault": fault, "lifecycle_state": self._driver_state(),
                    "message": f"driver {self.params['driver']!r} {what}; active again"}

    def _driver_state(self) -> str:
        driver = self.host.driver
        return driver.lifecycle_state.value if driver is not None else "unconfigured"

    def _create_call_services(self) -> None:
        services = {}
        for name, spec in sorted(self.host.api.specs.items()):
            if spec.group in SERVICE_GROUPS and not spec.physical:
                services[name] = self.create_service(RobotCall, f"{spec.group}/{name}",
                                                     partial(self._on_named_call, name), callback_group=self._group)
        self._call_services = services or {"robot_call": None}

    def shutdown_robot(self) -> None:
        """Stop the state topics, cancel motions, hold the arm and shut the driver down."""
        self._stop.set()
        self._publishing.stop()
        self.host.shutdown()

    def _on_publishing_error(self, exc: Exception) -> None:
        self.get_logger().error(f"state topics: {type(exc).__name__}: {exc}", throttle_duration_sec=10.0)

    def destroy_node(self) -> None:
        """Hold and release the driver, then destroy the node."""
        self.shutdown_robot()
        for server in self._actions:
            server.destroy()
        super().destroy_node()

    # -------------------------------------------------------------------- actions
    def _on_goal(self, name: str, goal: Any) -> GoalResponse:
        problem = goal_problem(name, goal)
        if problem:
            if getattr(goal, "args_json", "") == PROBE_ARGS_JSON:
                # a client's connection probe: rejected, never run (logged at debug level; one
                # call site per severity, rclpy refuses a call site whose severity changes)
                self.get_logger().debug(f"rejected a {name} connection probe")
                return GoalResponse.REJECT
            # a malformed goal (NaN, a wrong-length vector, an unknown mode): accepted without
            # taking the motion slot, so that ``_execute`` ends it at once ABORTED with the
            # reason in its result (a rejection carries no reason to the client)
            self.get_logger().warning(f"refused a {name} goal: {problem}")
            return GoalResponse.ACCEPT
        if not self.host.ready or self.node_state != "active":
            self.get_logger().warning(f"rejected a {name} goal: the harness is {self.node_state} (driver "
                                      f"{self._driver_state()}); it accepts goals once active")
            return GoalResponse.REJECT
        with self._goal_lock:
            if self._active_goal is not None:
                self.get_logger().warning(f"rejected a {name} goal: {self._active_goal} is running "
                                          "(one motion goal at a time; cancel it or wait)")
                return GoalResponse.REJECT
            self._active_goal = name
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        motion = self.host.motion
        if motion is not None:
            motion.request_cancel()
        return CancelResponse.ACCEPT

    def _execute(self, name: str, goal_handle: Any) -> Any:
        action = ACTION_TYPES[name]
        problem = goal_problem(name, goal_handle.request)
        if problem:  # malformed (see ``_on_goal``): nothing runs, the motion slot was never taken
            failed = fail(FailureCategory.INVALID_ARGUMENT, f"{problem}; the goal was not run")
            goal_handle.abort()
            return _action_result(action, CallOutcome(failed, format_receipt(name, failed)))
        try:
            motion = self.host.motion
            kwargs = goal_kwargs(name, goal_handle.request)
            self.timing.begin()
            send = partial(self._feedback, action, goal_handle, [None, None])
            motion.set_feedback(send)
            send(0.0, None)
            try:
                with motion.cancel_scope(lambda: goal_handle.is_cancel_requested):
                    outcome = self.host.call(name, (), kwargs)
            finally:
                motion.set_feedback(None)
            self.timing.end(name, outcome.result, float(self.host.driver.control_period_s))
        except Exception as exc:  # a fault of the node itself: the arm holds, the client gets the reason
            self.host.cancel_and_hold()
            failed = fail(FailureCategory.INTERNAL_ERROR, f"{name}: the harness node failed ({type(exc).__name__}: "
                          f"{exc}); the arm is holding")
            outcome = CallOutcome(failed, format_receipt(name, failed))
            self.get_logger().error(outcome.result["message"])
        finally:
            with self._goal_lock:
                self._active_goal = None
        result = _action_result(action, outcome)
        cancelled = outcome.result.get("failure_category") == FailureCategory.CANCELLED.value
        # no wait for the last feedback to travel: the result is the motion's final word
        # (rclpy's ActionClient drops feedback it takes after the result; the whole stream
        # is on the goal's feedback topic)
        if cancelled and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif outcome.result.get("success"):
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _feedback(self, action: Any, goal_handle: Any, last: list, progress: float, state: Any) -> None:
        """One feedback message per ``state_sample_period_s`` of driver time and per
        ``1 / feedback_rate_hz`` of wall time at most, and always the first and the last
        (``last``: [driver time s, wall time s] of the previous message).

        A guarded motion carrying a load checks its state every control period, and one
        message per check was five times the stream of any other motion for its
        receivers. The wall-clock cap matters for simulations that run faster than real
        time: every action client in the graph receives every goal's feedback (one topic
        per action), so at one message per 50 ms of simulated time an unpaced simulation
        sent ~150 per second, and their handling slowed the simulation sharing the CPU by
        ~10 % (a move of a 30-move sequence: 297 ms, 270 ms with the cap, 252 ms with no
        feedback at all). A real arm (driver time = wall time) gets the same stream
        either way."""
        driver = self.host.driver
        now_s = time.monotonic()
        if state is None:
            if driver is None or driver.lifecycle_state is not DriverState.ACTIVE:
                return
            state = driver.read_state()
        elif progress < 1.0 and last[0] is not None:
            config = getattr(self.host.motion, "config", None)
            period = (float(getattr(config, "state_sample_period_s", 0.0))
                      - 0.5 * float(getattr(driver, "control_period_s", 0.0)))
            if 0.0 <= float(state.time_s) - last[0] < period:
                return
            rate_hz = float(self.params["feedback_rate_hz"])
            if rate_hz > 0.0 and now_s - last[1] < 1.0 / rate_hz:
                return
        last[0], last[1] = float(state.time_s), now_s
        fb = action.Feedback(progress=float(progress))
        if hasattr(fb, "force_n"):
            fb.force_n = float(state.contact_force_n)
        if hasattr(fb, "tcp_pose"):
            position, quaternion = self.host.motion.tcp_pose(state.joint_positions_rad)
            fb.tcp_pose = pose_msg(position, quaternion)
        goal_handle.publish_feedback(fb)
        self.timing.feedback()

    # ------------------------------------------------------------------- services
    def _call(self, name: str, args_json: str) -> Any:
        if not name:
            result = fail(FailureCategory.INVALID_ARGUMENT, "give the name of a robot call, e.g. get_robot_state")
            return result_msg(CallOutcome(result, format_receipt("robot_call", result)))
        try:
            args, kwargs = call_args(args_json)
        except ValueError as exc:
            result = fail(FailureCategory.INVALID_ARGUMENT,
                          f"{name}: {exc}; send args_json as {{\"args\": [...], \"kwargs\": {{...}}}}")
            return result_msg(CallOutcome(result, format_receipt(name, result)))
        if name in ACTION_TYPES:
            result = fail(FailureCategory.INVALID_ARGUMENT,
                          f"{name} moves the robot: send it as a goal of the {name} action")
            return result_msg(CallOutcome(result, format_receipt(name, result)))
        return result_msg(self.host.call(name, args, kwargs))

    def _on_robot_call(self, request: Any, response: Any) -> Any:
        response.result = self._call(request.name, request.args_json)
        return response

    def _on_named_call(self, name: str, request: Any, response: Any) -> Any:
        response.result = self._call(name, request.args_json)
        return response

    def _on_describe(self, request: Any, response: Any) -> Any:
        info = self.host.describe()
        response.robot, response.driver = info["robot"], info["driver"]
        response.names = info["names"]
        response.calls_json = json.dumps(info["calls"])
        return response

    def _on_recover(self, request: Any, response: Any) -> Any:
        outcome = self.recover()
        response.success, response.message = bool(outcome["success"]), str(outcome["message"])
        response.cleared_fault, response.lifecycle_state = str(outcome["cleared_fault"]), str(
            outcome["lifecycle_state"])
        # one logging call site per severity: rclpy refuses a call site whose severity changes
        if response.success:
            self.get_logger().info(f"recover_driver: {response.message}")
        else:
            self.get_logger().warning(f"recover_driver: {response.message}")
        return response

    def _on_reset(self, request: Any, response: Any) -> Any:
        if request.init_state < -1:
            response.success = False
            response.message = (f"init_state must be -1 (the default) or an initial-state index, "
                                f"not {request.init_state}")
            return response
        with self._goal_lock:
            busy = self._active_goal
        if busy is not None:
            response.success = False
            response.message = f"{busy} is running; cancel it before starting an episode"
            return response
        if self.node_state != "active":
            response.success = False
            response.message = (f"the harness is {self.node_state}; episodes start once it is active "
                                f"({self.host.last_error or 'the driver is starting'})")
            return response
        try:
            start = self.host.reset_episode(request.task, int(request.init_state), int(request.seed),
                                            request.workspace)
        except (HostError, Exception) as exc:
            response.success = False
            response.message = f"{type(exc).__name__}: {exc}"
            self.get_logger().error(f"episode reset failed: {response.message}")
            return response
        response.success = True
        response.task_json = task_json(start.task)
        response.initial_images = start.initial_images
        return response

    def _on_host_state(self, request: Any, response: Any) -> Any:
        try:
            state = self.host.host_state(bool(request.include_snapshot))
        except Exception as exc:
            response.available, response.message = False, f"{type(exc).__name__}: {exc}"
            return response
        response.available, response.success = state["available"], state["success"]
        response.message = state["message"]
        if state["snapshot"] is not None:
            response.snapshot_json = json.dumps(state["snapshot"], default=_plain)
        return response

    # ---------------------------------------------------------------- diagnostics
    def _diagnostic_statuses(self) -> list[Any]:
        name = self.get_fully_qualified_name()
        host = self.host
        driver = host.driver
        lifecycle = driver.lifecycle_state.value if driver is not None else "unconfigured"
        fault = warning = ""
        if driver is not None and lifecycle in ("inactive", "active"):
            try:
                fault = driver.read_state().fault
                warning = str(getattr(driver, "watchdog_warning", "") or "")
            except Exception as exc:
                fault = f"{type(exc).__name__}: {exc}"
        sim_time = bool(self.get_parameter("use_sim_time").value)
        if sim_time and driver is not None and not host.simulated and not warning:
            warning = ("use_sim_time is true but the driver drives a real robot: the harness publishes no /clock "
                       "for it, so the node clock (diagnostics, state stamps) follows another node's /clock or "
                       "stands at 0; set use_sim_time false")
        values = {"driver": host.driver_name, "node_state": self.node_state, "lifecycle_state": lifecycle,
                  "fault": fault or "none",
                  "warning": warning or "none",
                  "task": host.task.task_id if host.task is not None else "",
                  "control_period_s": getattr(driver, "control_period_s", 0.0) if driver else 0.0,
                  "start_error": host.last_error or "none", "use_sim_time": sim_time}
        if fault:
            level, message = diag.ERROR, f"driver fault: {fault} (call recover_driver once the cause is fixed)"
        elif warning and lifecycle in ("inactive", "active"):
            level, message = diag.WARN, f"driver {lifecycle}: {warning}"
        elif host.ready:
            level, message = diag.OK, "driver active"
        elif host.last_error:
            level, message = diag.ERROR, f"driver failed to start: {host.last_error}"
        else:
            level, message = diag.WARN, f"driver {lifecycle}, starting"
        with self._goal_lock:
            active = self._active_goal
        motion = {"active_goal": active or "none", **self.timing.values()}
        return [diag.status(f"{name}: driver", level, message, values, hardware_id=host.driver_name),
                diag.status(f"{name}: motion", diag.OK, f"running {active}" if active else "idle", motion)]


def _action_result(action: Any, outcome: CallOutcome) -> Any:
    """The action's result message: the call's result and receipt, and the typed fields
    (``stopped_reason``, ``executed_distance_m``, ``max_observed_force_n``) where it has them."""
    result = action.Result(result=result_msg(outcome))
    value = outcome.result.get("value") if isinstance(outcome.result.get("value"), dict) else {}
    if hasattr(result, "stopped_reason"):
        result.stopped_reason = str(value.get("stopped_reason") or outcome.result.get("failure_category") or "")
    if hasattr(result, "executed_distance_m"):
        result.executed_distance_m = float(value.get("executed_distance_m") or 0.0)
    if hasattr(result, "max_observed_force_n"):
        result.max_observed_force_n = float(value.get("max_observed_force_n") or 0.0)
    return result


def _json_object(text: str, name: str) -> dict[str, Any]:
    try:
        data = json.loads(text or "{}")
    except ValueError as exc:
        raise HostError(f"parameter {name} must be a JSON object: {exc}") from exc
    if not isinstance(data, dict):
        raise HostError(f"parameter {name} must be a JSON object, e.g. {{\"settle_s\": 0.2}}")
    return data


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``harness_node``."""
    from captain_harness.nodes.hosting import run_nodes

    return run_nodes([HarnessNode], args)


if __name__ == "__main__":
    raise SystemExit(main())
