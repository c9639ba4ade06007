"""The perception node's work: run requests on its backends with a bounded queue and a
timeout per request (ROS-free; ``captain_perception.nodes.perception_server`` wraps it).

* **Bounded queue**: at most ``queue_size`` requests are held (waiting or running); one
  more is answered at once with ``not_available`` ("overloaded") instead of waiting.
* **Workers**: ``workers`` requests run at a time (one for a single GPU model); the
  others wait their turn in arrival order.
* **Timeout**: a request answers ``timeout`` when its time (wait plus run) is up. A model
  cannot be interrupted mid-inference: it finishes in the background and keeps its worker
  until then, and its answer is dropped.
* **Cancel**: a cancelled request leaves the queue at once, or, while running, is answered
  ``cancelled`` at once (the backend finishes in the background as above).
* **Frames by reference**: a request naming ``(camera, stamp_s)`` instead of carrying pixels
  gets the frame from ``frames`` (the node's camera-topic ring, ``core.frame_refs``) with
  the request's ``K`` and ``T_base_camera``; when it is not held the request answers
  ``frame_not_held`` at once (before queueing), and the client sends the pixels.

Times are ``time.monotonic`` seconds.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from captain_harness.core.results import FailureCategory
from captain_perception.core.errors import PerceptionError
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.pointer import PointingClient
from captain_perception.core.remote import (
    FRAME_NOT_HELD,
    KINDS,
    PerceptionReply,
    PerceptionRequest,
    RegionAnswer,
    failure,
)
from captain_perception.core.segmenters.base import Segmenter

#: How often a waiting request looks at its cancel flag, s.
CANCEL_POLL_S = 0.05


@dataclass(frozen=True)
class ServingConfig:
    """Limits of the node's queue.

    Attributes:
        queue_size: requests held at once (waiting plus running); more are refused.
        workers: requests run at once.
        default_timeout_s: a request's timeout when it gives none, s.
        max_timeout_s: the longest timeout a request may ask for, s.
    """

    queue_size: int = 8
    workers: int = 1
    default_timeout_s: float = 30.0
    max_timeout_s: float = 600.0


class PerceptionServer:
    """Answers ``PerceptionRequest``s with a segmenter and a pointing client (see the module docstring).

    Args:
        segmenter: the text-prompted segmenter (None: segment requests answer not_available).
        pointer: the pointing client (None: point requests answer not_available).
        config: queue limits.
        frames: looks up a frame by reference ``(camera, stamp_s) -> CameraFrame | None``
            (the node's camera-topic cache); None: requests must carry their pixels.
    """

    def __init__(self, segmenter: Segmenter | None, pointer: PointingClient | None,
                 config: ServingConfig | None = None,
                 frames: Callable[[str, float], Any] | None = None) -> None:
        self.segmenter = segmenter
        self.pointer = pointer
        self.config = config or ServingConfig()
        if self.config.queue_size < 1 or self.config.workers < 1:
            raise ValueError("queue_size and workers must be at least 1")
        self.frames = frames
        self._pool = ThreadPoolExecutor(max_workers=self.config.workers, thread_name_prefix="perception-worker")
        self._slots = threading.Semaphore(self.config.workers)
        self._lock = threading.Lock()
        self._held = 0
        self._waiting: list[int] = []
        self._ticket = 0
        self.counts = {"served": 0, "refused_overloaded": 0, "timed_out": 0, "cancelled": 0, "failed": 0,
                       "by_reference": 0, "frame_not_held": 0}

    # ------------------------------------------------------------------ state
    @property
    def held(self) -> int:
        """Requests waiting or running now."""
        return self._held

    def describe(self) -> dict[str, Any]:
        """The backends and the queue, for ``describe`` and diagnostics."""
        return {"segmenter": self.segmenter.describe() if self.segmenter else None,
                "pointer": {"model": self.pointer.config.model, "configured": self.pointer.config.configured}
                if self.pointer else None,
                "queue_size": self.config.queue_size, "workers": self.config.workers,
                "default_timeout_s": self.config.default_timeout_s, "held": self._held, **self.counts}

    def close(self) -> None:
        """Stop the workers (running requests finish first)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ requests
    def handle(self, request: PerceptionRequest, cancelled: Callable[[], bool] | None = None,
               on_stage: Callable[[str, int], None] | None = None) -> PerceptionReply:
        """Answer one request (blocks the calling thread until the answer; never raises).

        Args:
            request: the request.
            cancelled: returns True once the client has cancelled.
            on_stage: told ``("queued", requests ahead)`` and ``("running", 0)``.
        """
        received = time.monotonic()
        cancelled = cancelled or (lambda: False)
        try:
            reply = self._handle(request, received, cancelled, on_stage)
        except Exception as exc:  # never raise into the node
            self.counts["failed"] += 1
            reply = failure(FailureCategory.INTERNAL_ERROR,
                            f"the perception node hit an internal error ({type(exc).__name__}: {exc}); "
                            f"{traceback.format_exc(limit=3)[-300:]}")
        return PerceptionReply(**{**reply.__dict__, "server_time_s": time.monotonic() - received})

    def _timeout(self, request: PerceptionRequest) -> float:
        t = float(request.timeout_s or 0.0)
        if not t > 0:
            t = self.config.default_timeout_s
        return min(t, self.config.max_timeout_s)

    def _handle(self, request: PerceptionRequest, received: float, cancelled: Callable[[], bool],
                on_stage: Callable[[str, int], None] | None) -> PerceptionReply:
        bad = self._check(request)
        if bad is not None:
            return bad
        if request.frame_ref is not None:
            frame = self._frame(request)
            if frame is None:
                self.counts["frame_not_held"] += 1
                camera, stamp = request.frame_ref
                return failure(FRAME_NOT_HELD, f"the perception node holds no {camera} frame stamped {stamp:.6f} s "
                               "(it keeps the latest frames of its camera topics); send the frame's pixels")
            self.counts["by_reference"] += 1
            request = dataclasses.replace(request, frame=frame, frame_ref=None)
        timeout_s = self._timeout(request)
        deadline = received + timeout_s
        with self._lock:
            if self._held >= self.config.queue_size:
                self.counts["refused_overloaded"] += 1
                return failure(FailureCategory.NOT_AVAILABLE,
                               f"the perception node is overloaded ({self._held} requests held, queue size "
                               f"{self.config.queue_size}); try again shortly")
            self._held += 1
            self._ticket += 1
            ticket = self._ticket
            self._waiting.append(ticket)
            ahead = len(self._waiting) - 1
        slot_taken = False
        try:
            if on_stage:
                on_stage("queued", ahead)
            # wait for a worker, in arrival order
            while True:
                with self._lock:
                    first = self._waiting[0] == ticket
                if first and self._slots.acquire(timeout=CANCEL_POLL_S):
                    slot_taken = True
                    break
                if not first:
                    time.sleep(0.002)
                if cancelled():
                    self.counts["cancelled"] += 1
                    return failure(FailureCategory.CANCELLED, "cancelled while waiting in the queue")
                if time.monotonic() >= deadline:
                    self.counts["timed_out"] += 1
                    return failure(FailureCategory.TIMEOUT,
                                   f"the request waited {timeout_s:g} s in the perception node's queue "
                                   f"({ahead} ahead of it) without starting")
            with self._lock:
                self._waiting.remove(ticket)
            queue_s = time.monotonic() - received
            if on_stage:
                on_stage("running", 0)
            done = threading.Event()
            future: Future = self._pool.submit(self._run, request)
            future.add_done_callback(lambda _f: (self._slots.release(), done.set()))
            slot_taken = False  # the worker's done callback gives the slot back
            while not done.wait(min(CANCEL_POLL_S, max(0.0, deadline - time.monotonic()))):
                if cancelled():
                    self.counts["cancelled"] += 1
                    return failure(FailureCategory.CANCELLED, "cancelled while running (the backend finishes "
                                   "in the background)")
                if time.monotonic() >= deadline:
                    self.counts["timed_out"] += 1
                    return failure(FailureCategory.TIMEOUT,
                                   f"the {request.kind} request did not finish within its {timeout_s:g} s "
                                   f"(waited {queue_s:.2f} s in the queue)")
            reply = future.result()
            self.counts["served"] += 1
            return PerceptionReply(**{**reply.__dict__, "queue_time_s": queue_s})
        finally:
            with self._lock:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
                self._held -= 1
            if slot_taken:
                self._slots.release()

    def _check(self, request: PerceptionRequest) -> PerceptionReply | None:
        if request.kind not in KINDS:
            return failure(FailureCategory.INVALID_ARGUMENT,
                           f"unknown request kind {request.kind!r}; valid: {', '.join(KINDS)}")
        if not request.text.strip():
            return failure(FailureCategory.INVALID_ARGUMENT, "the request's text is empty; name the object")
        if not 1 <= request.max_results <= 20:
            return failure(FailureCategory.INVALID_ARGUMENT,
                           f"max_results must be in 1..20, got {request.max_results}")
        if request.kind == "segment":
            if self.segmenter is None:
                return failure(FailureCategory.NOT_AVAILABLE, "this perception node serves no segmenter")
            if request.backend and request.backend != self.segmenter.name:
                return failure(FailureCategory.NOT_AVAILABLE,
                               f"this perception node's segmenter is {self.segmenter.name!r}, not "
                               f"{request.backend!r}; configure the client for {self.segmenter.name!r} or start "
                               f"a node serving {request.backend!r}", self.segmenter.name)
        elif self.pointer is None:
            return failure(FailureCategory.NOT_AVAILABLE, "this perception node serves no pointing model")
        if request.frame is None and request.frame_ref is None:
            return failure(FailureCategory.INVALID_ARGUMENT, "the request carries no frame and no frame reference")
        return None

    def _frame(self, request: PerceptionRequest) -> Any:
        """The referenced frame with the request's calibration, or None when not held."""
        camera, stamp = request.frame_ref  # type: ignore[misc]
        held = self.frames(camera, stamp) if self.frames else None
        if held is None or request.frame is None:
            return held
        return dataclasses.replace(held, K=request.frame.K, T_base_camera=request.frame.T_base_camera)

    def _run(self, request: PerceptionRequest) -> PerceptionReply:
        try:
            frame = request.frame
            started = time.monotonic()
            if request.kind == "segment":
                assert self.segmenter is not None
                if frame.depth_m.size == 0:
                    raise _Refused(FailureCategory.INVALID_ARGUMENT, "segment needs the frame's depth image")
                segments = self.segmenter.segment(FrameCloud(frame), request.text, request.max_results)
                regions = tuple(RegionAnswer(label=s.label, score=float(s.score), mask=np.asarray(s.mask, bool),
                                             evidence=s.evidence) for s in segments[:request.max_results])
                return PerceptionReply(status="ok", backend=self.segmenter.name, regions=regions,
                                       model_time_s=time.monotonic() - started)
            assert self.pointer is not None
            answer = self.pointer.point(frame.rgb, request.text)
            regions = tuple(RegionAnswer(label=request.text, score=float("nan"), point_uv=(float(u), float(v)))
                            for u, v in answer.points_uv[:request.max_results])
            return PerceptionReply(status="ok", backend=self.pointer.config.model or "pointer", regions=regions,
                                   raw_text=answer.raw_text, model_time_s=time.monotonic() - started)
        except _Refused as exc:
            return failure(exc.category, exc.message)
        except PerceptionError as exc:
            return failure(exc.category, str(exc), self.segmenter.name if self.segmenter else "")


class _Refused(Exception):
    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message
