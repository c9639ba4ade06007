"""A minimal MoveTo action server used by the transport test: it "moves" a point toward
the goal at a fixed rate, publishes feedback every cycle, honours cancel by holding, and
returns the result dict as JSON. Run as a separate process."""

from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from captain_interfaces.action import MoveTo

RATE_HZ = 50.0
SPEED_M_S = 0.5


class Server(Node):
    def __init__(self) -> None:
        super().__init__("move_to_test_server")
        self._position = np.zeros(3)
        self._lock = threading.Lock()
        self._server = ActionServer(
            self, MoveTo, "move_to", execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup())

    def _on_goal(self, goal: MoveTo.Goal) -> GoalResponse:
        ok = len(goal.position_m) == 3 and all(np.isfinite(goal.position_m))
        return GoalResponse.ACCEPT if ok else GoalResponse.REJECT

    def _execute(self, handle):
        with self._lock:
            target = np.asarray(handle.request.position_m, dtype=float)
            start = self._position.copy()
            dist = float(np.linalg.norm(target - start))
            steps = max(1, int(dist / SPEED_M_S * RATE_HZ))
            reason = "target_reached"
            for k in range(1, steps + 1):
                if handle.is_cancel_requested:
                    reason = "cancelled"
                    break
                self._position = start + (target - start) * k / steps
                fb = MoveTo.Feedback()
                fb.progress = float(k / steps)
                fb.tcp_pose.position.x, fb.tcp_pose.position.y, fb.tcp_pose.position.z = self._position
                handle.publish_feedback(fb)
                time.sleep(1.0 / RATE_HZ)
            result = MoveTo.Result()
            result.stopped_reason = reason
            result.executed_distance_m = float(np.linalg.norm(self._position - start))
            result.result.success = reason == "target_reached"
            result.result.executed = True
            result.result.receipt = (f"move_to: ok; stopped_reason={reason} "
                                     f"executed_distance_m={result.executed_distance_m:.4g}")
            result.result.result_json = json.dumps({"success": result.result.success,
                                                    "value": {"stopped_reason": reason}})
            if reason == "cancelled":
                handle.canceled()
            else:
                handle.succeed()
            return result


def main() -> int:
    rclpy.init()
    node = Server()
    executor = MultiThreadedExecutor()
    executor.add_node(node)
    print("READY", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
