"""Parameters of the perception node: type, default, unit, range and meaning, in one place
(ROS-free)."""

from __future__ import annotations

from captain_backends.core.params import ParamSpec

SCHEMA: tuple[ParamSpec, ...] = (
    ParamSpec("harness_namespace", str, "",
              "namespace of the harness node (e.g. /robot1); empty: this node's own namespace"),
    ParamSpec("groups", list, ["perception", "measurement"],
              "groups of robot calls served as services <group>/<call>"),
    ParamSpec("call_timeout_s", float, 120.0, "longest wait for the harness's answer to one call", unit="s",
              min_value=0.1, max_value=3600.0),
    ParamSpec("discovery_period_s", float, 0.5, "how often the harness is asked for its calls until it answers",
              unit="s", min_value=0.05, max_value=60.0),
    ParamSpec("describe_timeout_s", float, 5.0,
              "a describe_robot request unanswered this long is given up and sent again (a response can be "
              "lost while the harness has not yet discovered this node's response reader)",
              unit="s", min_value=0.1, max_value=600.0),
    ParamSpec("proxy", bool, True,
              "serve the harness's perception and measurement calls as services (forwarded to its robot_call); "
              "false: a perception server only (its READY line does not wait for a harness)"),
    ParamSpec("serve", bool, True,
              "serve the segmentation and pointing backends (perception/perceive action, perception/perceive_frame "
              "and perception/describe services) to the harnesses' remote perception clients"),
    ParamSpec("segmenter", str, "classical", "the segmenter served: classical (CPU, no weights) or sam3",
              choices=("classical", "sam3")),
    ParamSpec("sam3_weights_path", str, "", "local SAM 3 weights folder (segmenter sam3); empty: not configured"),
    ParamSpec("sam3_device", str, "cpu", "torch device of SAM 3, e.g. cuda or cpu"),
    ParamSpec("pointer_base_url", str, "",
              "OpenAI-compatible endpoint of the pointing model (e.g. http://localhost:8001/v1); empty: none"),
    ParamSpec("pointer_model", str, "", "the pointing model's name at that endpoint (e.g. allenai/Molmo2-8B)"),
    ParamSpec("queue_size", int, 8, "requests held at once (waiting plus running); more are refused as overloaded",
              min_value=1, max_value=64),
    ParamSpec("workers", int, 1, "requests run at once (1 for one GPU model)", min_value=1, max_value=16),
    ParamSpec("request_timeout_s", float, 30.0,
              "a request's timeout (queue wait plus run time) when it sets none", unit="s",
              min_value=0.1, max_value=600.0),
    ParamSpec("frame_cameras", str, "",
              "comma-separated cameras (e.g. agentview,robot0_eye_in_hand) whose topics <camera>/color/image_raw and "
              "<camera>/aligned_depth_to_color/image_raw (under harness_namespace) the node keeps recent frames of, "
              "so that requests may name a frame by (camera, stamp) instead of carrying its pixels; empty: none "
              "(subscribing makes a harness with camera_rate_hz > 0 render its cameras at that rate)"),
    ParamSpec("frame_ring_size", int, 8, "frames kept per camera for requests by reference", min_value=1,
              max_value=64),
    ParamSpec("autostart", bool, True,
              "take the managed node through configure and activate as it starts; false: it stays unconfigured "
              "until a lifecycle manager (lifecycle_msgs ChangeState) configures and activates it"),
    ParamSpec("diagnostics_rate_hz", float, 1.0, "rate of diagnostic_msgs/DiagnosticArray on diagnostics",
              unit="Hz", min_value=0.1, max_value=50.0),
)
