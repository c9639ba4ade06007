"""A node in a private rclpy context, spun by a single-threaded executor in a daemon thread.

Clients that live inside another program (the episode CLI's stack client, the episode
runner's robot client, tests) use one so they never touch the global context, never
install signal handlers and can be closed without shutting rclpy down for anyone else.
A ``SingleThreadedExecutor``: their callbacks are short (futures, diagnostics) and
blocking waits happen in the caller's thread, so one thread is enough.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from typing import Any


def spin_reporting(executor: Any, context: Any, node: Any) -> None:
    """Spin ``executor`` until it is shut down; if it stops on an error while ``context`` is
    still up (not a close in progress), log it on ``node``: a client whose executor has
    stopped gets no further answers, and every later wait of it would time out unexplained."""
    from rclpy.executors import ExternalShutdownException

    try:
        executor.spin()
    except ExternalShutdownException:
        pass
    except Exception:
        if context.ok():
            node.get_logger().error(
                "the executor stopped; no further answers reach this client:\n" + traceback.format_exc())


class PrivateNode:
    """``self.node`` in its own context; create its clients, then ``start()`` the spin thread.

    Args:
        node_name: the node's name.
        namespace: its namespace ("" for the root).
    """

    def __init__(self, node_name: str, namespace: str = "") -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.context = Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node: Any = rclpy.create_node(node_name, namespace=namespace or "", context=self.context)
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=f"{node_name}_executor", daemon=True)

    def start(self) -> None:
        """Start spinning the node in the daemon thread."""
        self._thread.start()

    def _spin(self) -> None:
        spin_reporting(self._executor, self.context, self.node)

    def close(self) -> None:
        """Stop the executor, destroy the node, shut the context down and join the thread
        (at most ~3 s)."""
        with contextlib.suppress(Exception):
            self._executor.shutdown(timeout_sec=1.0)
        with contextlib.suppress(Exception):
            self.node.destroy_node()
        with contextlib.suppress(Exception):
            self.context.try_shutdown()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
