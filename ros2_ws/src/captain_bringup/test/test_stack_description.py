"""The one description of the stacks (core/stack.py), the parameter files checked against
every node's schema, the launch files checked against the description, and the
in-process runner's parameter path."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from captain_backends.core.params import ParameterError, ParamSpec
from captain_bringup.cli.bringup import describe_stack, parse_overrides
from captain_bringup.core.stack import (
    STACKS,
    StackError,
    default_config_dir,
    load_params,
    node_key,
    param_files,
    stack_nodes,
)
from captain_bringup.runner import ROS_BUILTIN_PARAMS, node_schema, ros_arguments, stack_params, write_params_file

PACKAGE = Path(__file__).resolve().parents[1]
LAUNCH = PACKAGE / "launch"
SRC = PACKAGE.parent


def _raw_values(stack: str) -> dict[str, dict]:
    return load_params(stack)


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_node_resolves_to_a_factory_and_a_schema(stack: str) -> None:
    for spec in stack_nodes(stack):
        module_name, _, attr = spec.factory.partition(":")
        module = importlib.import_module(module_name)
        assert callable(getattr(module, attr)), spec.factory
        assert hasattr(module, "main"), f"{module_name} needs main() for the {spec.executable} console script"
        assert module_name.rsplit(".", 1)[1] == spec.executable
        if spec.schema:
            schema = node_schema(spec)
            assert schema and all(isinstance(s, ParamSpec) for s in schema)


def test_console_scripts_are_declared() -> None:
    """``ros2 launch`` starts each node by its executable: the package must install it."""
    for spec in {s for nodes in STACKS.values() for s in nodes}:
        module_name = spec.factory.partition(":")[0]
        setup = (SRC / spec.package / "setup.py").read_text()
        assert f"{spec.executable} = {module_name}:main" in setup, (
            f"{spec.package}/setup.py must declare the console script "
            f"'{spec.executable} = {module_name}:main'")


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_parameter_files_fit_every_schema_with_ros_types(stack: str) -> None:
    checked = stack_params(stack)
    raw = _raw_values(stack)
    for spec in stack_nodes(stack):
        schema = node_schema(spec)
        if schema is None:
            continue
        by_name = {s.name: s for s in schema}
        for name, value in raw[spec.name].items():
            if name in ROS_BUILTIN_PARAMS:  # use_sim_time: declared by rclpy itself
                assert isinstance(value, ROS_BUILTIN_PARAMS[name]) and checked[spec.name][name] == value
                continue
            declared = by_name[name]
            # rclpy refuses an integer for a double parameter: the YAML must say 2.0, not 2
            if declared.type is float:
                assert isinstance(value, float), f"{stack}: {spec.name}.{name} = {value!r} must be written as a float"
            if declared.type is list:
                assert isinstance(value, list) and value, f"{stack}: {spec.name}.{name} must be a non-empty list"
            assert checked[spec.name][name] == value


def test_overlays_pick_the_driver_of_each_stack() -> None:
    drivers = {stack: stack_params(stack)["harness"]["driver"] for stack in STACKS}
    assert drivers == {"sim": "tabletop", "xr1_twin": "xr1", "xr1_real": "xr1"}
    for stack in ("xr1_twin", "xr1_real"):  # the robot side publishes its own readings
        harness = stack_params(stack)["harness"]
        assert harness["joint_states_rate_hz"] == harness["camera_rate_hz"] == 0.0
    # overlays are small: they change a few values of the shared file
    base = yaml.safe_load((default_config_dir() / "captain.yaml").read_text())
    for stack in STACKS:
        overlay = yaml.safe_load((default_config_dir() / f"{stack}.yaml").read_text())
        assert {node_key(k) for k in overlay} <= {node_key(k) for k in base} | {"xr1_twin"}
        assert sum(len(v["ros__parameters"]) for v in overlay.values()) <= 10


def test_bad_values_are_refused_with_the_valid_range_or_names() -> None:
    with pytest.raises(ParameterError, match="above its maximum 60"):
        stack_params("sim", overrides={"harness": {"camera_rate_hz": 100.0}})
    with pytest.raises(ParameterError, match=r"known: .*camera_rate_hz"):
        stack_params("sim", overrides={"harness": {"camera_rate_hz_typo": 1.0}})
    with pytest.raises(ParameterError, match="one of: ros, in_process"):
        stack_params("sim", overrides={"episode_runner": {"robot": "remote"}})
    with pytest.raises(StackError, match="unknown node"):
        stack_params("sim", overrides={"nobody": {"x": 1}})
    with pytest.raises(StackError, match="choose one of: sim, xr1_twin, xr1_real"):
        stack_nodes("mars")
    assert stack_params("sim", overrides={"harness": {"camera_rate_hz": 1}})["harness"]["camera_rate_hz"] == 1.0


def test_use_sim_time_is_accepted_for_every_node_and_type_checked() -> None:
    sim = stack_params("sim")
    assert sim["harness"]["use_sim_time"] is True  # config/sim.yaml: the harness publishes /clock
    assert "use_sim_time" not in stack_params("xr1_twin")["harness"]  # a wall-clock stack
    params = stack_params("sim", overrides={"episode_runner": {"use_sim_time": False}})
    assert params["episode_runner"]["use_sim_time"] is False
    with pytest.raises(StackError, match=r"harness.use_sim_time must be a bool \(true or false\), not 'yes'"):
        stack_params("sim", overrides={"harness": {"use_sim_time": "yes"}})
    with pytest.raises(ParameterError, match="unknown parameter"):
        stack_params("sim", overrides={"harness": {"use_sim_tme": True}})


def test_nested_groups_become_dotted_names(tmp_path: Path) -> None:
    overlay = tmp_path / "more.yaml"
    overlay.write_text("harness:\n  ros__parameters:\n    motion:\n      contact_threshold_n: 9.5\n")
    params = stack_params("sim", extra_files=[overlay])["harness"]
    assert params["motion.contact_threshold_n"] == 9.5
    assert params["motion.emergency_force_n"] == 80.0  # the base file's other motion values stay


def test_command_line_overrides() -> None:
    assert parse_overrides(["harness.driver=mock", "harness.camera_rate_hz=0.5", "perception.groups=[perception]"]) \
        == {"harness": {"driver": "mock", "camera_rate_hz": 0.5}, "perception": {"groups": ["perception"]}}
    import typer

    with pytest.raises(typer.BadParameter, match=r"node\.parameter=value"):
        parse_overrides(["driver=mock"])


def test_describe_lists_nodes_and_parameter_tables() -> None:
    from captain_bringup.cli.main import app

    result = CliRunner().invoke(app, ["bringup", "sim", "--describe"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "## harness (captain_harness/harness_node; process harness)" in result.output
    assert "## perception (captain_perception/perception_node; process perception, respawn after 2 s)" \
        in result.output
    assert "| `camera_rate_hz` | float | `2.0` | Hz | [0.0, 60.0] |" in result.output
    assert "`motion.emergency_force_n`" in result.output and "## episode_runner" in result.output
    assert "`use_sim_time`" in result.output
    assert "## xr1_twin (captain_backends/xr1_twin; process xr1_twin)" in describe_stack("xr1_twin")


# --------------------------------------------------------------------- launch files
def _tree(name: str) -> ast.Module:
    return ast.parse((LAUNCH / name).read_text())


def test_core_launch_file_reads_the_stack_description() -> None:
    tree = _tree("core.launch.py")
    imports = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {("captain_bringup.core.stack", "stack_nodes"), ("captain_bringup.core.stack", "param_files"),
            ("launch_ros.actions", "Node")} <= imports
    nodes = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "Node"]
    assert len(nodes) == 1
    kw = {k.arg: ast.unparse(k.value) for k in nodes[0].keywords}
    assert kw["package"] == "spec.package" and kw["executable"] == "spec.executable" and kw["name"] == "spec.name"
    assert "parameters" in kw and "namespace" in kw
    assert kw["respawn"] == "spec.respawn" and kw["respawn_delay"] == "spec.respawn_delay_s"
    loops = [c for c in ast.walk(tree) if isinstance(c, ast.comprehension)]
    assert any(ast.unparse(c.iter) == "stack_nodes(stack)" for c in loops)
    assert "param_files(stack)" in ast.unparse(tree)


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_each_wrapper_includes_the_core_file_with_its_stack(stack: str) -> None:
    path = LAUNCH / f"{stack}.launch.py"
    assert path.is_file(), f"every stack has a wrapper launch file: {path.name}"
    text = ast.unparse(_tree(path.name))
    assert "core.launch.py" in text and "IncludeLaunchDescription" in text
    assert f"'stack': '{stack}'" in text


@pytest.mark.skipif(importlib.util.find_spec("launch_ros") is None, reason="launch_ros is not installed here")
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_launch_description_matches_the_stack_description(stack: str) -> None:
    from launch import LaunchContext
    from launch.utilities import perform_substitutions

    spec_ = importlib.util.spec_from_file_location("core_launch", LAUNCH / "core.launch.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    module.generate_launch_description()
    context = LaunchContext()
    context.launch_configurations.update({"stack": stack, "namespace": ""})
    launched = module._nodes(context)
    expected = stack_nodes(stack)
    assert len(launched) == len(expected)
    for node, spec in zip(launched, expected, strict=True):
        assert perform_substitutions(context, node.node_package) == spec.package
        assert perform_substitutions(context, node.node_executable) == spec.executable
        assert perform_substitutions(context, node._Node__node_name) == spec.name


# ------------------------------------------------------------------- runner params
def _parameters_of(node_name: str, args: list[str], names: list[str]) -> tuple[str, dict]:
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(args=args, context=context)
    try:
        node = rclpy.create_node(node_name, context=context, automatically_declare_parameters_from_overrides=True)
        try:
            return node.get_namespace(), {name: node.get_parameter(name).value for name in names}
        finally:
            node.destroy_node()
    finally:
        context.try_shutdown()


@pytest.mark.ros
@pytest.mark.parametrize("path", ["runner", "launch"])
def test_parameters_reach_a_namespaced_node_as_the_files_say(path: str, tmp_path: Path, ros_domain: int) -> None:
    """The runner's merged file, and the stack's own files as ``ros2 launch`` passes them
    (one ``--params-file`` each, then the namespace remap), give a node in a namespace the
    values ``stack_params`` computes."""
    params = stack_params("xr1_twin")
    if path == "runner":
        args = ros_arguments(write_params_file(params, tmp_path), "robot7")
    else:
        args = ["x", "--ros-args", *[a for f in param_files("xr1_twin") for a in ("--params-file", str(f))],
                "-r", "__ns:=/robot7"]
    for node in ("harness", "xr1_twin"):
        namespace, got = _parameters_of(node, args, list(params[node]))
        assert namespace == "/robot7"
        assert got == params[node], node
    assert params["harness"]["driver"] == "xr1" and params["xr1_twin"]["image_size_px"] == 256


# ------------------------------------------------------------------ process model
def test_simulators_never_share_a_process_with_the_harness() -> None:
    from captain_bringup.core.stack import process_groups

    for stack in STACKS:
        groups = process_groups(stack)
        harness_group = next(g for g, specs in groups.items() if any(s.name == "harness" for s in specs))
        # the robot side (twin, fake hardware, camera simulators) lives in a group of its own
        for spec in groups[harness_group]:
            assert spec.package != "captain_backends", f"{stack}: {spec.name} shares the harness's process"
        assert [s.name for specs in groups.values() for s in specs] == [s.name for s in stack_nodes(stack)]
    assert list(process_groups("xr1_twin")) == ["xr1_twin", "harness", "perception", "episode_runner"]
