"""Helpers of the XR1 ROS tests: an isolated domain, robot-side nodes in subprocesses,
and a spy node that records what crosses the wire and sets the nodes' parameters.

The ``ros_domain`` fixture comes from the repository's root conftest.py.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time


class RobotProcess:
    """A robot-side node (``python -m <module>``) in a subprocess, started until READY."""

    def __init__(self, module: str, params: dict[str, object] | None = None, namespace: str = "",
                 ready_timeout_s: float = 60.0) -> None:
        args = [sys.executable, "-m", module, "--ros-args"]
        for k, v in (params or {}).items():
            args += ["-p", f"{k}:={v}"]
        if namespace:
            args += ["-r", f"__ns:=/{namespace.strip('/')}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip())
                if line.strip() == "READY":
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(ready_timeout_s):
            self.stop()
            raise RuntimeError(f"{module} did not start:\n" + "\n".join(self.lines))

    def stop(self) -> None:
        """SIGINT, then wait (kill after 10 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


class Spy:
    """A test-side node in its own context: records messages on topics (with the
    middleware's reception times on ``time.monotonic``) and sets parameters of other nodes."""

    def __init__(self, namespace: str = "") -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.context = Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("xr1_test_spy", namespace=namespace, context=self.context)
        self.records: dict[str, list[tuple[float, object]]] = {}
        self._parameter_clients: dict[str, object] = {}
        self._subscriptions: dict[str, object] = {}
        self._lock = threading.Lock()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        with contextlib.suppress(ExternalShutdownException):
            self.executor.spin()

    def record(self, msg_type: type, topic: str, qos=None) -> None:
        """Start recording ``topic``."""
        from rclpy.qos import QoSProfile

        from captain_backends.nodes.xr1_messages import READING_QOS, stamp_age_s

        self.records[topic] = []

        def callback(msg, info, topic=topic) -> None:
            # the middleware's reception time (system clock) on time.monotonic, as the
            # driver stamps its readings: this process's scheduling does not shift it
            received = time.monotonic() - (stamp_age_s(info["received_timestamp"]) or 0.0)
            with self._lock:
                self.records[topic].append((received, msg))

        if qos is None:  # the readings' QoS with a deep history: a busy test process must not drop samples it checks
            qos = QoSProfile(depth=1000, reliability=READING_QOS.reliability, history=READING_QOS.history)
        self._subscriptions[topic] = self.node.create_subscription(msg_type, topic, callback, qos)

    def matched_publishers(self, topic: str) -> int:
        """Publishers this spy's subscription of ``topic`` has matched (its own side of
        discovery: a publisher that counts this subscription may not be matched here yet,
        and what it sends until then is not received)."""
        return self._subscriptions[topic].get_publisher_count()

    def messages(self, topic: str, after_s: float = -1.0) -> list[tuple[float, object]]:
        """(receipt time, message) pairs received after ``after_s``."""
        with self._lock:
            return [(t, m) for t, m in self.records[topic] if t > after_s]

    def set_parameters(self, node_name: str, values: dict[str, object], timeout_s: float = 10.0) -> None:
        """Set parameters of another node through its parameter services.

        One client per node, kept: a new client's response reader must first be matched by
        the server's response writer, and a response sent before that is lost (volatile
        QoS). The request is therefore sent again each second until answered (setting the
        same values twice is harmless)."""
        from rclpy.parameter import Parameter
        from rclpy.parameter_client import AsyncParameterClient

        client = self._parameter_clients.get(node_name)
        if client is None:
            client = self._parameter_clients[node_name] = AsyncParameterClient(self.node, node_name)
        assert client.wait_for_services(timeout_sec=timeout_s), f"parameter services of {node_name} not found"
        deadline = time.monotonic() + timeout_s
        futures: list = []
        sent_at = float("-inf")
        while not any(f.done() for f in futures):
            assert time.monotonic() < deadline, f"setting {values} on {node_name} timed out"
            if time.monotonic() - sent_at > 1.0:
                futures.append(client.set_parameters([Parameter(k, value=v) for k, v in values.items()]))
                sent_at = time.monotonic()
            time.sleep(0.005)
        results = next(f for f in futures if f.done()).result().results
        assert all(r.successful for r in results), [r.reason for r in results]

    def close(self) -> None:
        """Stop spinning and shut the context down."""
        self.executor.shutdown(timeout_sec=2.0)
        self.thread.join(timeout=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()
