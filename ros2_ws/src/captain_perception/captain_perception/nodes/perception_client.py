"""The harness side of the perception node: a ROS transport for ``core.remote``'s
``RemoteSegmenter`` and ``RemotePointer``.

``RosPerceptionTransport`` runs its own rclpy context and node (``perception_client``)
with a single-threaded executor in a daemon thread, so it works the same inside the
harness node's process, in an episode worker or in a plain script, and a slow or dead
perception node never blocks the caller's executor. A request goes as the
``perception/perceive`` action (default: cancelled when its timeout passes) or as the
``perception/perceive_frame`` service.

Frames by reference: ``publish_frames`` publishes camera frames on the camera topics under
the node's namespace (``captain_perception.nodes.frame_topics``) and notes them in
``references``; ``RemoteSegmenter`` / ``RemotePointer`` then name those frames by
``(camera, stamp)`` (a node started with ``frame_cameras`` keeps them).

Failures raise ``core.remote.TransportError`` (the remote backends turn it into
``not_available`` with the reason): no perception node found within ``connect_timeout_s``,
the node vanished while answering, the goal was rejected. A request that gets no answer
within its timeout (plus ``grace_s`` for the transfer) answers ``timeout``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from typing import Any

from captain_backends.core.driver import CameraFrame
from captain_perception.core.frame_refs import PublishedFrames
from captain_perception.core.remote import PerceptionReply, PerceptionRequest, TransportError, failure

#: How often a waiting request checks that the node is still there, s.
LIVENESS_POLL_S = 0.25
#: How long a connection probe waits for its answer before it is sent again, s.
PROBE_RESEND_S = 0.5


class RosPerceptionTransport:
    """Sends perception requests to the node in ``namespace`` (see the module docstring).

    Args:
        namespace: the perception node's namespace ("" or "/": the root).
        use_action: the action (cancel on timeout) instead of the service.
        connect_timeout_s: longest wait for the node to be discovered the first time, s
            (a fresh participant's discovery on a loaded machine takes seconds).
        reconnect_timeout_s: the same once the node has answered before (a node that went
            away fails each call after this long instead), s.
        grace_s: added to a request's own timeout for the transfer, s.
    """

    def __init__(self, namespace: str = "", *, use_action: bool = True, connect_timeout_s: float = 10.0,
                 reconnect_timeout_s: float = 2.0, grace_s: float = 2.0) -> None:
        import rclpy
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor

        from captain_interfaces.action import Perceive
        from captain_interfaces.srv import DescribePerception, PerceiveFrame
        from captain_perception.nodes.perception_server import ACTION, DESCRIBE, SERVICE

        self.namespace = "/" + namespace.strip("/") if namespace.strip("/") else ""
        self.use_action = use_action
        self.connect_timeout_s = connect_timeout_s
        self.reconnect_timeout_s = reconnect_timeout_s
        self._connected_once = False
        self.grace_s = grace_s
        self._context = rclpy.Context()
        self._context.init(args=[])
        self.node = rclpy.create_node(f"perception_client_{os.getpid()}_{id(self) % 100000}",
                                      context=self._context, start_parameter_services=False)
        self._Perceive, self._PerceiveFrame, self._Describe = Perceive, PerceiveFrame, DescribePerception
        self._action = ActionClient(self.node, Perceive, self.namespace + "/" + ACTION)
        self._service = self.node.create_client(PerceiveFrame, self.namespace + "/" + SERVICE)
        self._describe = self.node.create_client(DescribePerception, self.namespace + "/" + DESCRIBE)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="perception-client", daemon=True)
        self._thread.start()
        self._closed = False
        self._handshaken: set[bool] = set()
        #: frames published by ``publish_frames`` (shared by the transports of one namespace)
        self.references = published_frames(self.namespace)
        self._frame_publisher: Any = None
        atexit.register(self.close)

    def _spin(self) -> None:
        from captain_harness.nodes.private_node import spin_reporting

        spin_reporting(self._executor, self._context, self.node)

    # ------------------------------------------------------------------ helpers
    def _ready(self, use_action: bool | None = None) -> bool:
        use_action = self.use_action if use_action is None else use_action
        return self._action.server_is_ready() if use_action else self._service.service_is_ready()

    def wait_for_node(self, timeout_s: float | None = None, use_action: bool | None = None) -> bool:
        """True once the perception node is discovered (waits up to ``timeout_s``)."""
        if timeout_s is None:
            timeout_s = self.reconnect_timeout_s if self._connected_once else self.connect_timeout_s
        deadline = time.monotonic() + timeout_s
        while not self._ready(use_action):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def _wait(self, future: Any, deadline: float, what: str, use_action: bool) -> Any:
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        next_check = time.monotonic() + LIVENESS_POLL_S
        while not done.wait(max(0.0, min(deadline, next_check) - time.monotonic())):
            now = time.monotonic()
            if now >= deadline:
                return None
            if now >= next_check:
                next_check = now + LIVENESS_POLL_S
                if not self._ready(use_action):
                    raise TransportError(f"the perception node at {self.namespace or '/'} went away while "
                                         f"answering ({what})")
        return future.result()

    def _handshake(self, use_action: bool) -> None:
        """Send a probe until one is answered (a rejected goal, an invalid_argument reply).

        Discovery is not symmetric: the client may see the node before the node has matched
        the client's reply reader, and a reply sent in that window is lost; once a probe is
        answered, replies reach this client."""
        if use_action in self._handshaken:
            return
        deadline = time.monotonic() + self.connect_timeout_s
        while time.monotonic() < deadline:
            if use_action:
                future = self._action.send_goal_async(self._Perceive.Goal())
            else:
                future = self._service.call_async(self._PerceiveFrame.Request())
            done = threading.Event()
            future.add_done_callback(lambda _f, answered=done: answered.set())
            if done.wait(min(PROBE_RESEND_S, max(0.0, deadline - time.monotonic()))):
                self._handshaken.add(use_action)
                self._connected_once = True
                return
        raise TransportError(f"the perception node at {self.namespace or '/'} does not answer a connection probe "
                             f"(waited {self.connect_timeout_s:g} s)")

    # ------------------------------------------------------------------ calls
    def __call__(self, request: PerceptionRequest, use_action: bool | None = None) -> PerceptionReply:
        """Send ``request`` (as the action, or the service; None: the transport's default)
        and return the node's reply (see the module docstring)."""
        use_action = self.use_action if use_action is None else use_action
        if self._closed:
            raise TransportError("the perception client is closed")
        wait_s = self.reconnect_timeout_s if self._connected_once else self.connect_timeout_s
        if not self.wait_for_node(wait_s, use_action=use_action):
            kind = "action" if use_action else "service"
            raise TransportError(f"no perception node answers the {kind} {self.namespace}/perception/"
                                 f"{'perceive' if use_action else 'perceive_frame'} (waited "
                                 f"{wait_s:g} s); is the perception node running?")
        try:
            self._handshake(use_action)
            return self._send(request, use_action)
        except TransportError:
            self._handshaken.discard(use_action)  # the node may come back (respawn): probe it again
            raise

    def _send(self, request: PerceptionRequest, use_action: bool) -> PerceptionReply:
        from captain_perception.nodes.perception_messages import fill_request, reply_from_msg

        timeout_s = request.timeout_s if request.timeout_s > 0 else 30.0
        deadline = time.monotonic() + timeout_s + self.grace_s
        if not use_action:
            msg = fill_request(self._PerceiveFrame.Request(), request)
            response = self._wait(self._service.call_async(msg), deadline, "service call", use_action)
            if response is None:
                raise TransportError(f"the perception node at {self.namespace or '/'} did not answer within "
                                     f"{timeout_s:g} s: it is down or stalled (its own timeout would have "
                                     "answered first)")
            return reply_from_msg(response)
        goal = fill_request(self._Perceive.Goal(), request)
        handle = self._wait(self._action.send_goal_async(goal), deadline, "goal", use_action)
        if handle is None:
            raise TransportError(f"the perception node at {self.namespace or '/'} did not take the request "
                                 f"within {timeout_s:g} s: it is down or stalled")
        if not handle.accepted:
            raise TransportError("the perception node rejected the request")
        result = self._wait(handle.get_result_async(), deadline, "result", use_action)
        if result is None:
            handle.cancel_goal_async()
            return failure("timeout", f"the perception node did not answer within {timeout_s:g} s; the request "
                           "was cancelled")
        return reply_from_msg(result.result)

    def publish_frames(self, frames: dict[str, CameraFrame] | list[CameraFrame]) -> None:
        """Publish camera frames on the camera topics under the node's namespace (stamp =
        ``time_s``); later requests about them go by reference."""
        from captain_perception.nodes.frame_topics import FrameTopicPublisher

        if self._frame_publisher is None:
            self._frame_publisher = FrameTopicPublisher(self.node, self.namespace, self.references)
        for frame in frames.values() if isinstance(frames, dict) else frames:
            self._frame_publisher.publish(frame)

    def frame_subscribers(self, camera: str) -> int:
        """Subscriptions matched by ``camera``'s colour and depth topics (0 before ``publish_frames``)."""
        return self._frame_publisher.subscribers(camera) if self._frame_publisher is not None else 0

    def describe(self, timeout_s: float = 3.0) -> dict[str, Any]:
        """The node's ``perception/describe`` answer (raises ``TransportError`` without one)."""
        import json

        if not self._describe.wait_for_service(timeout_sec=timeout_s):
            raise TransportError(f"no perception node answers {self.namespace}/perception/describe")
        response = self._wait(self._describe.call_async(self._Describe.Request()),
                              time.monotonic() + timeout_s, "describe", False)
        if response is None:
            raise TransportError("the perception node did not describe itself in time")
        return json.loads(response.description_json)

    def close(self) -> None:
        """Stop the client's executor and context (idempotent)."""
        if self._closed:
            return
        self._closed = True
        # stop the spin thread first, then the node, then the context (destroying them
        # under a running wait set aborts the process at exit)
        with contextlib.suppress(Exception):
            self._executor.shutdown(timeout_sec=2.0)
        self._thread.join(timeout=2.0)
        if not self._thread.is_alive():
            # a spin thread still waiting holds the entities' handles: destroying the action
            # client under it blocks for ever (seen once in a fresh-clone test run); the
            # daemon thread and the entities then go with the process
            with contextlib.suppress(Exception):
                self._action.destroy()
            with contextlib.suppress(Exception):
                self.node.destroy_node()
        with contextlib.suppress(Exception):
            self._context.try_shutdown()


_SHARED: dict[str, RosPerceptionTransport] = {}
_SHARED_LOCK = threading.Lock()
_PUBLISHED: dict[str, PublishedFrames] = {}
_PUBLISHED_LOCK = threading.Lock()


def published_frames(namespace: str = "") -> PublishedFrames:
    """The frames this process published on the camera topics under ``namespace``."""
    key = "/" + namespace.strip("/") if namespace.strip("/") else ""
    with _PUBLISHED_LOCK:
        return _PUBLISHED.setdefault(key, PublishedFrames())


def shared_transport(namespace: str = "") -> RosPerceptionTransport:
    """One transport per process and namespace (created on first use; a process shares
    its DDS participant among its perception objects)."""
    with _SHARED_LOCK:
        transport = _SHARED.get(namespace)
        if transport is None or transport._closed:
            transport = _SHARED[namespace] = RosPerceptionTransport(namespace)
        return transport


class LazyTransport:
    """A transport that creates the shared ROS transport on its first request (a harness
    that never segments never starts a ROS context for it)."""

    def __init__(self, namespace: str = "", use_action: bool = True) -> None:
        self.namespace = namespace
        self.use_action = use_action
        self.references = published_frames(namespace)

    def __call__(self, request: PerceptionRequest) -> PerceptionReply:
        """Send ``request`` through the shared transport."""
        try:
            transport = shared_transport(self.namespace)
        except Exception as exc:
            raise TransportError(f"cannot start the ROS client of the perception node ({exc})") from exc
        return transport(request, use_action=self.use_action)
