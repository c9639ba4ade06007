"""The perception node's backends served over ROS 2 (thin: the work is ``core.serving``).

Interfaces, under the node's namespace:

* ``perception/perceive`` (captain_interfaces/action/Perceive): a request with cancel and
  feedback (``queued`` with the requests ahead, then ``running``); long requests (a
  model's inference) use it; a goal with an empty ``kind`` is rejected (a client's
  connection probe);
* ``perception/perceive_frame`` (captain_interfaces/srv/PerceiveFrame): the same request
  and answer as one service call (short requests, no cancel);
* ``perception/describe`` (captain_interfaces/srv/DescribePerception): the backends and
  the queue as JSON.

Frames by reference: with ``frame_cameras`` (e.g. ``agentview,robot0_eye_in_hand``) the node
subscribes to those cameras' topics under ``harness_namespace``
(``captain_perception.nodes.frame_topics``) and keeps the latest ``frame_ring_size`` frames
of each; a request may then name a frame by ``(camera, stamp_s)`` instead of carrying
its pixels (``frame_not_held`` when it is not kept: the client sends the pixels).

The handlers are coroutines: a request waits and runs in a thread of the server's own
pool (``queue_size`` threads plus one for refusals) and the executor's threads stay free
(rclpy 9.1.2's MultiThreadedExecutor wakes every one of its threads for each ready
callback, so a thread per queued request would cost every request several milliseconds).

While the node is not active (a managed node deactivated over ``lifecycle_msgs``), a goal
or a call answers ``not_available`` with the reason in its result; a goal is accepted so
that its result can say so (a rejection carries no reason).

Backends: parameters ``segmenter`` (``classical``, ``sam3`` with ``sam3_weights_path`` and
``sam3_device``) and ``pointer_base_url`` / ``pointer_model`` (an OpenAI-compatible
endpoint); ``queue_size``, ``workers`` and ``request_timeout_s`` bound the queue.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future

from captain_harness.core.results import FailureCategory
from captain_interfaces.action import Perceive
from captain_interfaces.srv import DescribePerception, PerceiveFrame
from captain_perception.core.pointer import PointerConfig, PointingClient
from captain_perception.core.remote import failure
from captain_perception.core.segmenters import make_segmenter
from captain_perception.core.serving import PerceptionServer, ServingConfig
from captain_perception.nodes.perception_messages import fill_reply, request_from_msg

ACTION = "perception/perceive"
SERVICE = "perception/perceive_frame"
DESCRIBE = "perception/describe"


def server_from_params(params: dict[str, Any]) -> PerceptionServer:
    """The ``PerceptionServer`` the node's parameters describe (the segmenter is built now:
    a model backend loads its weights lazily on the first request)."""
    options: dict[str, Any] = {}
    if params["segmenter"] == "sam3":
        options = {"weights_path": params["sam3_weights_path"] or None, "device": params["sam3_device"]}
    segmenter = make_segmenter(params["segmenter"], **options)
    pointer = PointingClient(PointerConfig(base_url=params["pointer_base_url"], model=params["pointer_model"],
                                           timeout_s=params["request_timeout_s"]))
    config = ServingConfig(queue_size=params["queue_size"], workers=params["workers"],
                           default_timeout_s=params["request_timeout_s"])
    return PerceptionServer(segmenter, pointer, config)


class PerceptionServing:
    """Attaches the perception server's action and services to ``node``.

    Args:
        node: the rclpy node (the perception node).
        server: the work (``core.serving.PerceptionServer``).
        refusal: why a new request is refused now ("" to serve it), e.g. the managed
            node's "inactive"; a refused request answers ``not_available`` with that reason.
        frame_cameras: cameras whose topics the node keeps frames of (requests by reference).
        frame_prefix: the namespace of those topics ("" = the node's).
        frame_ring_size: frames kept per camera.
    """

    def __init__(self, node: Any, server: PerceptionServer, refusal: Callable[[], str] = lambda: "",
                 frame_cameras: list[str] | None = None, frame_prefix: str = "", frame_ring_size: int = 8) -> None:
        self.node = node
        self.server = server
        self.refusal = refusal
        self.frame_cache: Any = None
        if frame_cameras:
            from captain_perception.nodes.frame_topics import CameraFrameCache

            self.frame_cache = CameraFrameCache(node, list(frame_cameras), frame_prefix, frame_ring_size,
                                                ReentrantCallbackGroup())
            server.frames = self.frame_cache.frame
        self._threads = ThreadPoolExecutor(max_workers=server.config.queue_size + 1,
                                           thread_name_prefix="perception-request")
        group = ReentrantCallbackGroup()
        self._action = ActionServer(node, Perceive, ACTION, execute_callback=self._execute,
                                    goal_callback=self._on_goal,
                                    cancel_callback=lambda _handle: CancelResponse.ACCEPT, callback_group=group)
        self._service = node.create_service(PerceiveFrame, SERVICE, self._on_service, callback_group=group)
        self._describe = node.create_service(DescribePerception, DESCRIBE, self._on_describe, callback_group=group)

    @staticmethod
    def _on_goal(goal: Any) -> Any:
        # a goal without a kind is a client's connection probe: its answer (rejected) tells
        # the client that the node's replies reach it
        return GoalResponse.ACCEPT if goal.kind else GoalResponse.REJECT

    def _request(self, msg: Any) -> Any:
        refused = self.refusal()
        if refused:
            return None, failure(FailureCategory.NOT_AVAILABLE, refused)
        try:
            return request_from_msg(msg), None
        except (ValueError, TypeError) as exc:
            return None, failure(FailureCategory.INVALID_ARGUMENT, f"malformed perception request: {exc}")

    async def _in_thread(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` run in the request pool, awaited without holding an executor thread."""
        future: Future = Future(executor=self.node.executor)
        future.add_done_callback(lambda _f: None)  # completing it then wakes the executor

        def work() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting handler
                future.set_exception(exc)

        self._threads.submit(work)
        return await future

    async def _on_service(self, request: Any, response: Any) -> Any:
        def answer() -> Any:
            req, bad = self._request(request)
            return fill_reply(response, bad if bad is not None else self.server.handle(req))

        return await self._in_thread(answer)

    async def _execute(self, goal_handle: Any) -> Any:
        def stage(name: str, ahead: int) -> None:
            goal_handle.publish_feedback(Perceive.Feedback(stage=name, queue_position=ahead))

        def answer() -> Any:
            req, bad = self._request(goal_handle.request)
            reply = bad if bad is not None else self.server.handle(
                req, cancelled=lambda: goal_handle.is_cancel_requested, on_stage=stage)
            return reply, fill_reply(Perceive.Result(), reply)

        reply, result = await self._in_thread(answer)
        if reply.status == FailureCategory.CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif reply.status == "ok":
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _on_describe(self, _request: Any, response: Any) -> Any:
        response.description_json = json.dumps(self.server.describe())
        return response

    def destroy(self) -> None:
        """Remove the action server, the services and the camera subscriptions, and stop the workers."""
        if self.frame_cache is not None:
            self.frame_cache.destroy()
        self._action.destroy()
        for service in (self._service, self._describe):
            self.node.destroy_service(service)
        self._threads.shutdown(wait=False, cancel_futures=True)
        self.server.close()
