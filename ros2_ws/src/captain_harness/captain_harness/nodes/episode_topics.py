"""The episode runner's live record topics, so that ``captain bringup --record``
(``recorder_node``) records an episode's requests beside the robot's topics.

After every request the runner publishes, each a std_msgs/String holding one JSON object
(``core.episode.event_payloads``, the payloads of the in-process episode bag too):

* ``captain/requests``: ``request_index``, ``reasoning``, ``content``, ``code`` (one
  string per cell), ``policy_s`` and ``harness_s`` (s);
* ``captain/cells``: ``request_index``, ``cell``, ``code``, ``output``, ``receipts``;
* ``captain/receipts``: ``request_index``, ``cell``, ``index``, ``receipt``.

Relative names: ``/captain/...`` in the root namespace, as in the in-process bag. The
images a cell attached (``/captain/images/<camera>`` in the in-process bag) are not
published live: their files live in the episode's record folder.

QoS: reliable, keep last 100 (a request may carry many receipts at once).
"""

from __future__ import annotations

import json
from typing import Any

from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from captain_harness.core.episode.event_payloads import TOPICS, event_payloads

EPISODE_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
class EpisodeTopics:
    """Publishers of the record topics on ``node``."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.publishers = {topic: node.create_publisher(String, topic, EPISODE_QOS) for topic in TOPICS}

    def publish(self, event: dict[str, Any]) -> None:
        """Publish one request event (never raises: a failure is logged and the episode goes on)."""
        try:
            for topic, payload in event_payloads(event):
                self.publishers[topic].publish(String(data=json.dumps(payload, ensure_ascii=False, default=str)))
        except Exception as exc:
            self.node.get_logger().error(f"episode topics: {type(exc).__name__}: {exc}", throttle_duration_sec=10.0)
