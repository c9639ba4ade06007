"""Parameters of the episode runner node: type, default, unit, range and meaning, in one
place (ROS-free; see ``harness_params`` for how they are used)."""

from __future__ import annotations

from captain_backends.core.params import ParamSpec

SCHEMA: tuple[ParamSpec, ...] = (
    ParamSpec("robot", str, "ros",
              "where episodes run: ros (against the harness node's robot, through the ROS robot client) "
              "or in_process (a robot of its own per episode, as headless rollouts do)",
              choices=("ros", "in_process")),
    ParamSpec("harness_namespace", str, "",
              "namespace of the harness node (e.g. /robot1); empty: this node's own namespace"),
    ParamSpec("records_dir", str, "runs/episodes", "records root (episode folders, rows, images)"),
    ParamSpec("default_policy", str, "teacher", "policy of goals that leave policy empty"),
    ParamSpec("max_requests", int, 60, "request budget of an episode", min_value=1, max_value=10_000),
    ParamSpec("max_physical_actions", int, 150, "physical-action budget of an episode",
              min_value=1, max_value=100_000),
    ParamSpec("max_wall_time_s", float, 1080.0, "wall-time budget of an episode", unit="s",
              min_value=1.0, max_value=86_400.0),
    ParamSpec("cell_timeout_s", float, 120.0, "time limit of one code cell", unit="s",
              min_value=1.0, max_value=3600.0),
    ParamSpec("isolation", str, "auto", "sandbox isolation of the session: auto, bwrap or none",
              choices=("auto", "bwrap", "none")),
    ParamSpec("call_timeout_s", float, 600.0, "longest wait for one robot call over ROS (motions included)",
              unit="s", min_value=1.0, max_value=3600.0),
    ParamSpec("harness_wait_s", float, 60.0, "longest wait for the harness node at the start of an episode",
              unit="s", min_value=0.0, max_value=3600.0),
    ParamSpec("diagnostics_rate_hz", float, 1.0, "rate of diagnostic_msgs/DiagnosticArray on diagnostics",
              unit="Hz", min_value=0.1, max_value=50.0),
)
