"""The `captain` command: one home for every subcommand, and the bench output convention."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from captain_bringup.cli import bench as bench_cli
from captain_bringup.cli.main import SUBCOMMANDS, app

EXPECTED = {"demo", "run", "rollout", "bench", "bringup", "dds-clean", "datagen", "sft", "rl", "eval", "model", "serve"}


def test_help_lists_every_subcommand() -> None:
    out = subprocess.run([sys.executable, "-m", "captain_bringup.cli.main", "--help"],
                         capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": ""})
    assert out.returncode == 0, out.stderr
    listed = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("│ ") and len(line.split()) > 1}
    assert listed >= EXPECTED, f"missing: {EXPECTED - listed}"
    assert {name for name, _, _ in SUBCOMMANDS} == EXPECTED


def test_bench_lists_the_benchmarks() -> None:
    result = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in ("backends", "motion", "perception", "ros", "sft", "rl", "learning"):
        assert name in result.output


def test_bench_output_ends_with_one_json_line() -> None:
    text = bench_cli.render("demo", {"ik_median_us": 312.5, "episodes": 3}, 1.0)
    lines = text.splitlines()
    assert json.loads(lines[-1]) == {"ik_median_us": 312.5, "episodes": 3}
    assert any(line.startswith("ik_median_us") and "312.5" in line for line in lines[:-1])


def test_bench_options_parse_json_values() -> None:
    assert bench_cli.parse_options(["episodes=3", "suite=libero_spatial", "fast=true"]) == {
        "episodes": 3, "suite": "libero_spatial", "fast": True}
    with pytest.raises(typer.BadParameter, match="key=value"):
        bench_cli.parse_options(["episodes"])


def test_bench_refuses_an_option_the_benchmark_does_not_take() -> None:
    result = CliRunner().invoke(app, ["bench", "ros", "-o", "episode=8"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "no option(s) episode" in result.output and "episodes" in result.output
    result = CliRunner().invoke(app, ["bench", "teacher", "--quick"], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "takes no --quick" in result.output


def test_bench_options_pass_through_to_a_benchmark_that_checks_its_own() -> None:
    def own(**options: object) -> dict[str, float]:
        return {}

    bench_cli.check_options(own, {"anything": 1})
    bench_cli.check_options(lambda episodes=4, quick=False: {}, {"episodes": 8, "quick": True})
