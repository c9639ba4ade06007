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
    ParamSpec("diagnostics_rate_hz", float, 1.0, "rate of diagnostic_msgs/DiagnosticArray on diagnostics",
              unit="Hz", min_value=0.1, max_value=50.0),
)
