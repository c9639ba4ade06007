"""`captain bringup sim|xr1_twin|xr1_real`: run a stack's ROS 2 nodes as ``ros2 launch`` would.

The same nodes with the same parameters as ``ros2 launch captain_bringup
<stack>.launch.py`` (see ``captain_bringup.runner``), one OS process per node group
(``--in-process``: all in this process, for debugging). Prints ``READY ...`` once every
node is up; Ctrl-C (SIGINT) or SIGTERM stops the groups in reverse order (the harness
holds the arm and shuts its driver down before the robot side stops) and exits 0.

    captain bringup sim
    captain bringup sim --param harness.driver=mock --param harness.camera_rate_hz=0
    captain bringup xr1_twin --namespace robot1
    captain bringup sim --describe
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml


def parse_overrides(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """``node.parameter=value`` strings -> ``{node: {parameter: value}}`` (values parsed as
    YAML: ``0.5`` is a float, ``[a, b]`` a list, ``true`` a bool)."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        node, dot, name = key.partition(".")
        if not sep or not dot or not node or not name:
            raise typer.BadParameter(f"--param {pair!r} must look like node.parameter=value, "
                                     "e.g. harness.driver=mock")
        out.setdefault(node, {})[name] = yaml.safe_load(raw) if raw.strip() else ""
    return out


def describe_stack(stack: str) -> str:
    """The stack's nodes and each node's parameter table (Markdown)."""
    from captain_backends.core.params import describe
    from captain_bringup.core.stack import param_files, stack_nodes
    from captain_bringup.runner import node_schema

    lines = [f"# captain bringup {stack}", "", "Parameter files: " + ", ".join(str(p) for p in param_files(stack)), "",
             "Every node also takes ROS's `use_sim_time` (bool, default false; true: its clock follows /clock).", ""]
    for spec in stack_nodes(stack):
        respawn = f", respawn after {spec.respawn_delay_s:g} s" if spec.respawn else ""
        lines += [f"## {spec.name} ({spec.package}/{spec.executable}; process {spec.process_group}{respawn})", ""]
        schema = node_schema(spec)
        lines += [describe(schema) if schema else "(parameters: see the node's module docstring)", ""]
    return "\n".join(lines)


def start_recorder(path: Path, namespace: str = "", time_source: str = "auto") -> Any:
    """Start ``captain_harness.nodes.recorder_node`` writing the bag ``path`` (a process of
    its own, like the stack's node groups); ``time_source``: ``clock`` for a simulated stack."""
    import subprocess
    import sys

    if path.exists():
        raise typer.BadParameter(f"--record {path}: it exists; give a new folder for the bag")
    args = [sys.executable, "-m", "captain_harness.nodes.recorder_node", "--ros-args", "-p", f"path:={path}",
            "-p", f"time_source:={time_source}"]
    if namespace:
        args += ["-r", f"__ns:=/{namespace.strip('/')}"]
    return subprocess.Popen(args)


def stop_recorder(proc: Any, timeout_s: float = 30.0) -> None:
    """SIGINT the recorder and wait until it has finished the bag."""
    import signal
    import subprocess

    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bringup(
    stack: Annotated[str, typer.Argument(help="sim, xr1_twin or xr1_real")],
    namespace: Annotated[str, typer.Option(help="namespace for every node (topics are relative)")] = "",
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="node.parameter=value, e.g. harness.driver=mock (repeatable)")] = None,
    params_file: Annotated[list[Path] | None, typer.Option(
        help="further parameter YAML overlay, keyed by node name (repeatable; last wins)")] = None,
    ready_timeout_s: Annotated[float, typer.Option(help="longest wait for every node to be up, s")] = 300.0,
    describe: Annotated[bool, typer.Option("--describe", help="print the nodes and their parameters, then exit")
                        ] = False,
    in_process: Annotated[bool, typer.Option(
        "--in-process", help="host every node in this one process (debugging); default: one process per node group")
                          ] = False,
    record: Annotated[Path | None, typer.Option(
        help="also record the stack's topics into this rosbag2 bag folder (MCAP; simulated time on the sim stack)")
                      ] = None,
) -> None:
    """Run the ROS 2 nodes of sim, xr1_twin or xr1_real: one process per node group."""
    from captain_backends.core.errors import BackendError
    from captain_bringup.runner import run, run_processes

    try:
        if describe:
            typer.echo(describe_stack(stack))
            return
        start = run if in_process else run_processes
        recorder = (start_recorder(record, namespace, "clock" if stack == "sim" else "auto")
                    if record is not None else None)
        try:
            code = start(stack, namespace=namespace, extra_files=list(params_file or []),
                         overrides=parse_overrides(list(param or [])), ready_timeout_s=ready_timeout_s)
        finally:
            if recorder is not None:
                stop_recorder(recorder)
    except BackendError as exc:
        typer.echo(f"captain bringup {stack}: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    if code:
        raise typer.Exit(code=code)
