"""Test support for the bringup tests: start `captain bringup <stack>` in a subprocess on an
isolated ROS domain, and a plain rclpy client (its own context and executor thread)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def isolated_domain() -> Iterator[int]:
    """A coordinated ROS_DOMAIN_ID with localhost discovery, set in this process's
    environment (inherited by subprocesses) for the duration."""
    from captain_perception.nodes.dds_profile import localhost_domain

    with localhost_domain() as did:
        yield did


class Stack:
    """A `captain bringup` process: its output lines are collected by a reader thread."""

    def __init__(self, stack: str, *args: str, ready_timeout_s: float = 180.0) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        env = dict(os.environ, PYTHONUNBUFFERED="1", MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "captain_bringup.cli.main", "bringup", stack, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(ROOT))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.ready_line = self._wait_ready(ready_timeout_s)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)
        self._queue.put(None)

    def _wait_ready(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise AssertionError("bringup not READY in time:\n" + self.output()) from None
            if line is None:
                raise AssertionError(f"bringup exited ({self.proc.wait()}):\n" + self.output())
            if line.startswith("READY"):
                return line.strip()

    def output(self, limit: int = 150) -> str:
        """The stack's output so far for a failure message: each message once, in order of
        first appearance, with how often it came (numbers such as timestamps aside), the
        last ``limit`` of them."""
        counts: dict[str, int] = {}
        firsts: dict[str, str] = {}
        for line in list(self.lines):
            key = re.sub(r"\d+(\.\d+)?", "#", line)
            counts[key] = counts.get(key, 0) + 1
            firsts.setdefault(key, line)
        shown = list(firsts.items())[-limit:]
        return "\n".join(line if counts[key] == 1 else f"{line} [{counts[key]} times]" for key, line in shown)

    def overruns(self) -> str:
        """The robot side's periodic-loop overrun reports so far (for failure messages)."""
        found = [line for line in list(self.lines) if "periodic loop overrun" in line]
        return "\n" + "\n".join(found) if found else ""

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGINT, then wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5.0)
        return self.proc.returncode


class Client:
    """A plain rclpy client node with its own context, spun in a thread."""

    def __init__(self, namespace: str = "") -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.context = Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("stack_test_client", namespace=namespace, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._services: dict[str, Any] = {}
        self._actions: dict[str, Any] = {}
        self._parameter_clients: dict[str, Any] = {}
        self._answered: set[str] = set()
        self.spin_error: BaseException | None = None
        self.spin_trace = ""
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except BaseException as exc:  # kept for the failure message of a later wait
            self.spin_error = exc
            self.spin_trace = traceback.format_exc()

    def _silence(self, timeout_s: float) -> str:
        """Why a wait ended without an answer, as far as this client can tell."""
        if self.spin_error is not None:
            return f"no answer within {timeout_s} s: the client's executor stopped:\n{self.spin_trace}"
        alive = "is spinning" if self.thread.is_alive() else "has stopped"
        return f"no answer within {timeout_s} s (the client's executor {alive})"

    def wait(self, future: Any, timeout_s: float = 60.0) -> Any:
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        assert done.wait(timeout_s), self._silence(timeout_s)
        return future.result()

    def on_executor(self, make: Any, *args: Any) -> Any:
        """``make(*args)``, run on the executor's own thread.

        rclpy's ActionClient joins its node's waitables before its constructor has made
        the lock its wait-set methods take: built on another thread while the executor
        spins, it can be counted half-made, and the AttributeError ends the spin (every
        later answer to this client is then lost)."""
        return self.wait(self.executor.create_task(make, *args), timeout_s=30.0)

    def _answer(self, send: Any, request: Any, timeout_s: float, resend_s: float) -> Any:
        """The answer to ``request``, sent again every ``resend_s`` until one comes.

        Discovery is not symmetric: a client may see a server before the server has
        matched the client's reply reader, and a reply sent in that window is lost (on a
        loaded machine the window can outlast Fast DDS's 100 ms wait for the reader)."""
        deadline = time.monotonic() + timeout_s
        while True:
            done = threading.Event()
            future = send(request)
            future.add_done_callback(lambda _, answered=done: answered.set())
            if done.wait(max(0.0, min(resend_s, deadline - time.monotonic()))):
                return future.result()
            assert time.monotonic() < deadline, self._silence(timeout_s)

    def call(self, srv_type: Any, name: str, request: Any, timeout_s: float = 60.0, resend_s: float = 2.0) -> Any:
        """A service call on a client kept for the node's lifetime.

        Until the service has answered this client once, the request is resent every
        ``resend_s`` (a reply in the discovery window is lost; see ``_answer``); once it has,
        replies reach this client and a request is sent once (a resent request would run
        again: a second segmentation, a second perception request)."""
        client = self._services.get(name)
        if client is None:
            client = self._services[name] = self.node.create_client(srv_type, name)
        assert client.wait_for_service(timeout_sec=30.0), f"service {name} not available"
        if name in self._answered:
            resend_s = timeout_s
        response = self._answer(client.call_async, request, timeout_s, resend_s)
        self._answered.add(name)
        return response

    def action(self, action_type: Any, name: str, timeout_s: float = 30.0) -> Any:
        """An action client kept for the node's lifetime, ready for goals: the server has
        answered a goal it rejects (a harness action's ``args_json="[]"`` connection probe,
        or an episode goal without task or instruction), so its replies reach this client."""
        from rclpy.action import ActionClient

        client = self._actions.get(name)
        if client is None:
            client = self.on_executor(ActionClient, self.node, action_type, name)
            assert client.wait_for_server(timeout_sec=timeout_s), f"{name} action not available"
            probe = action_type.Goal()
            if hasattr(probe, "args_json"):
                probe.args_json = "[]"
            handle = self._answer(client.send_goal_async, probe, timeout_s, 2.0)
            assert not handle.accepted, f"the {name} server accepted a connection probe"
            self._actions[name] = client
        return client

    def feedback_tap(self, action_type: Any, name: str, timeout_s: float = 30.0) -> Any:
        """Every feedback message the ``name`` action's server publishes, read from its topic.

        rclpy's ActionClient drops feedback it takes after the goal's result (a client that
        lags behind the stream loses its tail; the topic and the result service are
        unordered), so a test of the whole stream reads the topic. Returns
        ``stream(goal_handle, until=None, timeout_s=10.0)``: that goal's feedback so far,
        after waiting up to ``timeout_s`` for one that satisfies ``until`` (if given)."""
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

        published: list = []
        topic = self.node.create_subscription(
            action_type.Impl.FeedbackMessage, f"{name}/_action/feedback", published.append,
            QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE))
        deadline = time.monotonic() + timeout_s
        while topic.get_publisher_count() == 0:
            assert time.monotonic() < deadline, f"the {name} feedback topic was not discovered"
            time.sleep(0.02)

        def stream(handle: Any, until: Any = None, timeout_s: float = 10.0) -> list:
            goal = bytes(handle.goal_id.uuid)
            end = time.monotonic() + timeout_s
            while True:
                mine = [m.feedback for m in list(published) if bytes(m.goal_id.uuid) == goal]
                if until is None or (mine and until(mine[-1])) or time.monotonic() >= end:
                    return mine
                time.sleep(0.02)

        return stream

    def set_parameters(self, node_name: str, values: dict[str, Any], timeout_s: float = 30.0) -> None:
        """Set parameters of another node through the standard parameter services."""
        from rclpy.parameter import Parameter
        from rclpy.parameter_client import AsyncParameterClient

        # one client per node, kept: a new one is discovered again (seconds on a loaded machine)
        client = self._parameter_clients.get(node_name)
        if client is None:
            client = self._parameter_clients[node_name] = AsyncParameterClient(self.node, node_name)
        assert client.wait_for_services(timeout_sec=timeout_s), f"parameter services of {node_name} not found"
        response = self.wait(client.set_parameters([Parameter(k, value=v) for k, v in values.items()]), timeout_s)
        assert all(r.successful for r in response.results), [r.reason for r in response.results]

    def robot_call(self, name: str, **kwargs: Any) -> dict[str, Any]:
        """A non-physical robot call through the harness's robot_call service."""
        from captain_interfaces.srv import RobotCall

        if "robot_call" not in self._answered:  # connect with a call refused at once (no name)
            self.call(RobotCall, "robot_call", RobotCall.Request(name="", args_json="{}"))
        response = self.call(RobotCall, "robot_call", RobotCall.Request(
            name=name, args_json=json.dumps({"args": [], "kwargs": kwargs})))
        return {"receipt": response.result.receipt, **json.loads(response.result.result_json)}

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()
        self.thread.join(timeout=2.0)
