"""Host rclpy nodes in one process: one context, an executor per node (a busy node never
delays another's callbacks), a READY line once every node is up, and a clean stop on
SIGINT/SIGTERM (hold the arm, release the drivers, exit 0).

Used by each node's console script (``harness_node``, ``episode_runner_node``, ...,
started by ``ros2 run`` / ``ros2 launch`` with ``--ros-args``), by ``captain bringup``'s
node-group processes (``captain_bringup.group_host``) and by ``captain bringup
--in-process``, which hosts a whole stack this way.

Executors are chosen per node: a node that needs callbacks to run concurrently says so
with an ``executor_threads`` attribute (> 1: a ``MultiThreadedExecutor`` with that many
threads, each node's docstring says why); every other node gets a
``SingleThreadedExecutor``. rclpy 9.1.2's ``MultiThreadedExecutor`` wakes all its
threads for each ready callback and they spin on the queue (ros2/rclpy#1452, fixed
upstream by #1547 but not in 9.1.2): it is kept to the nodes that block in callbacks,
with as few threads as they need. (``rclpy.experimental.EventsExecutor`` is the other
single-threaded choice; the plain ``SingleThreadedExecutor`` is used because its
behaviour with timers, parameter services and guard conditions is the long-tested one.)

Nodes may offer, and are then handled accordingly:

* ``executor_threads`` (int): see above;
* ``ready`` (property): the READY line waits until it is true;
* ``period_s`` and ``step(n)``: a periodic step on the wall clock (the XR1 twin),
  run in a thread of its own;
* ``shutdown_robot()``: called first on shutdown (hold the arm, release drivers);
* ``close()``: called after that (threads, renderers).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any


def make_executor(node: Any, context: Any = None) -> Any:
    """The executor a node asks for (module docstring): multi-threaded with
    ``node.executor_threads`` threads when that is above 1 (``handoff_executor_class``),
    else single-threaded."""
    from rclpy.executors import SingleThreadedExecutor

    threads = int(getattr(node, "executor_threads", 1) or 1)
    if threads > 1:
        return handoff_executor_class()(num_threads=threads, context=context)
    return SingleThreadedExecutor(context=context)


_HANDOFF: list[type] = []


def handoff_executor_class() -> type:
    """rclpy's ``MultiThreadedExecutor`` whose waiting thread hands each ready callback to
    a worker and waits until the worker has started it before it waits for more work.

    rclpy 9.1.2's own goes back to waiting at once; a callback still queued for a worker
    counts as ready work, so the waiting thread re-yields it and loops without blocking,
    holding the GIL, until a worker gets to it (ros2/rclpy#1452, fixed upstream by #1547).
    Each timer tick, ``/clock`` message or service request then cost milliseconds of CPU
    and slowed a motion running in another thread of the same process. Waiting for the
    start changes nothing else: a callback that cannot start (every worker busy) could not
    run any sooner, and the wait ends when the executor shuts down.

    ``/clock`` messages (rclpy's time source with ``use_sim_time``) are handled by the
    waiting thread itself: setting the node's clock takes microseconds, less than handing
    it to a worker and waiting for the worker to start."""
    if _HANDOFF:
        return _HANDOFF[0]
    from rclpy.executors import (
        ConditionReachedException,
        ExternalShutdownException,
        MultiThreadedExecutor,
        ShutdownException,
        TimeoutException,
    )

    class HandoffMultiThreadedExecutor(MultiThreadedExecutor):
        def _spin_once_impl(self, timeout_sec: Any = None, wait_condition: Callable[[], bool] = lambda: False
                            ) -> None:
            try:
                handler, entity, _node = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
            except (ExternalShutdownException, ShutdownException, TimeoutException, ConditionReachedException):
                return
            if getattr(entity, "topic_name", None) == "/clock":
                handler()  # rclpy's time source: a few microseconds, not worth two thread hand-offs
                handler.result()  # raise any exception
                return
            started = threading.Event()

            def run() -> None:
                started.set()
                handler()

            self._executor.submit(run)
            self._futures.append(handler)
            while not started.wait(0.05) and not self._is_shutdown and not handler.done():
                pass
            for future in self._futures[:]:
                if future.done():
                    self._futures.remove(future)
                    future.result()  # raise any exceptions

    _HANDOFF.append(HandoffMultiThreadedExecutor)
    return HandoffMultiThreadedExecutor


def _periodic(node: Any, stop: threading.Event) -> threading.Thread:
    from captain_backends.nodes.xr1_robot_io import run_periodic

    thread = threading.Thread(target=run_periodic, args=(float(node.period_s), node.step, stop),
                              name=f"{node.get_name()}_step", daemon=True)
    thread.start()
    return thread


def run_nodes(builders: Sequence[Callable[[], Any]], args: list[str] | None = None, *,
              label: str = "", ready_timeout_s: float = 300.0,
              on_ready: Callable[[list[Any]], None] | None = None) -> int:
    """Build the nodes (in order), spin them, print ``READY ...`` once all are ready,
    and return 0 after SIGINT/SIGTERM (or 1 when a node fails to become ready in time).

    Args:
        builders: zero-argument callables returning the nodes.
        args: command line with ``--ros-args`` (default ``sys.argv``).
        label: what the READY line names (default: the node names).
        ready_timeout_s: longest wait for every node's ``ready``.
        on_ready: called with the nodes once they are ready.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.signals import SignalHandlerOptions

    started = time.monotonic()
    rclpy.init(args=sys.argv if args is None else args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    # the handler only records the signal (re-entrant: a second signal may arrive while
    # the first is handled); the main thread polls it and sets ``stop`` itself
    signalled: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: signalled.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}

    def wait_stop(timeout_s: float | None = None) -> bool:
        end = None if timeout_s is None else time.monotonic() + timeout_s
        while not signalled and not stop.is_set() and (end is None or time.monotonic() < end):
            time.sleep(0.02 if end is None else max(0.0, min(0.02, end - time.monotonic())))
        if signalled:
            stop.set()
        return stop.is_set()

    executors: list[Any] = []
    nodes: list[Any] = []
    steppers: list[threading.Thread] = []
    code = 0
    spinners: list[threading.Thread] = []
    try:
        for build in builders:
            node = build()
            nodes.append(node)
            executor = make_executor(node)
            executor.add_node(node)
            executors.append(executor)
            if hasattr(node, "period_s") and hasattr(node, "step"):
                steppers.append(_periodic(node, stop))

        def spin(executor: Any) -> None:
            with contextlib.suppress(ExternalShutdownException):
                executor.spin()

        spinners = [threading.Thread(target=spin, args=(e,), name="executor", daemon=True) for e in executors]
        for spinner in spinners:
            spinner.start()
        deadline = time.monotonic() + ready_timeout_s
        while not wait_stop(0.0) and not all(getattr(n, "ready", True) for n in nodes):
            if time.monotonic() > deadline:
                waiting = [n.get_name() for n in nodes if not getattr(n, "ready", True)]
                print(f"FAILED: not ready after {ready_timeout_s:g} s: {', '.join(waiting)}", flush=True)
                code = 1
                stop.set()
                break
            wait_stop(0.02)
        if code == 0 and not wait_stop(0.0):
            names = ", ".join(n.get_fully_qualified_name() for n in nodes)
            print(f"READY {label or names} ({time.monotonic() - started:.2f} s)", flush=True)
            if on_ready is not None:
                on_ready(nodes)
            wait_stop()
    finally:
        for node in reversed(nodes):
            with contextlib.suppress(Exception):
                if hasattr(node, "shutdown_robot"):
                    node.shutdown_robot()
        stop.set()
        for thread in steppers:
            thread.join(timeout=5.0)
        for node in reversed(nodes):
            with contextlib.suppress(Exception):
                if hasattr(node, "close"):
                    node.close()
        for executor in executors:
            executor.shutdown(timeout_sec=2.0)
        for spinner in spinners:
            spinner.join(timeout=5.0)
        for node in reversed(nodes):
            with contextlib.suppress(Exception):
                node.destroy_node()
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code
