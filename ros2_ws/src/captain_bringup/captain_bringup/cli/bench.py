"""`captain bench <name>`: run a benchmark, print a readable table, then one JSON line.

Each benchmark is a function ``run(**options) -> dict[str, float]`` in the package it
measures, returning figures whose key names carry their units (``ik_median_us``,
``libero_step_ms``). Convention: the last line printed is exactly one JSON object.
"""

from __future__ import annotations

import importlib
import inspect
import json
import time
from typing import Any

import typer

#: name -> (module:function, what it measures)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "backends": ("captain_backends.bench:run", "env step, reset and render times per backend"),
    "motion": ("captain_harness.bench_motion:run", "IK, self-collision, sweep speed, call overhead"),
    "perception": ("captain_perception.remote_bench:run",
                   "perception latency and accuracy vs ground truth (-o remote=true|only: the node over ROS)"),
    "episode": ("captain_harness.core.episode.bench:run", "harness time per request"),
    "teacher": ("captain_teacher.bench:run",
                "teacher rollouts on LIBERO: success, episodes/hour/core, harness time per request"),
    "ros": ("captain_bringup.bench_ros:run", "ROS round-trip overhead and bringup time"),
    "sft": ("captain_training.sft.bench:run", "SFT validate/prepare throughput, train step"),
    "rl": ("captain_training.rl.bench:run", "critic training, policy-loss step, rollout throughput"),
    "learning": ("captain_training.sft.learning:run",
                 "teacher episodes -> SFT of SmolLM2-135M: held-out loss and tool-call validity (--quick), "
                 "base vs SFT success (full)"),
}

app = typer.Typer(no_args_is_help=True, help="Benchmarks: a table, then one JSON line of figures.")


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """Turn ``key=value`` strings into keyword arguments (values parsed as JSON when possible)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise typer.BadParameter(f"option {pair!r} must look like key=value")
        key, raw = pair.split("=", 1)
        try:
            options[key] = json.loads(raw)
        except json.JSONDecodeError:
            options[key] = raw
    return options


def check_options(fn: Any, options: dict[str, Any]) -> None:
    """Refuse keys ``fn`` has no parameter for (a benchmark taking ``**options`` checks its
    own), so a misspelt option is an error instead of a run with the default."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(options) - set(params))
    if unknown:
        valid = ", ".join(n for n in params if n != "quick")
        what = "--quick" if unknown == ["quick"] else "option(s) " + ", ".join(unknown)
        raise typer.BadParameter(f"this benchmark takes no {what}; its options: {valid}")


def render(name: str, figures: dict[str, float], elapsed_s: float) -> str:
    """The table followed by the JSON line."""
    width = max([len(k) for k in figures] + [6])
    lines = [f"captain bench {name}  ({elapsed_s:.1f} s)", f"{'figure':<{width}}  value", "-" * (width + 14)]
    for key, value in figures.items():
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"{key:<{width}}  {shown}")
    lines.append(json.dumps(figures, sort_keys=False))
    return "\n".join(lines)


def _make_command(name: str, target: str, what: str) -> None:
    def command(
        option: list[str] = typer.Option([], "--option", "-o", help="key=value passed to the benchmark"),  # noqa: B008
        quick: bool = typer.Option(False, "--quick", help="the benchmark's short mode (passes quick=true)"),
    ) -> None:
        module_name, attr = target.split(":")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            typer.echo(f"benchmark {name!r} is unavailable: {exc}", err=True)
            raise typer.Exit(code=2) from exc
        options = parse_options(option)
        if quick:
            options["quick"] = True
        check_options(fn, options)
        started = time.perf_counter()
        figures = fn(**options)
        typer.echo(render(name, figures, time.perf_counter() - started))

    command.__doc__ = what
    app.command(name=name, help=what)(command)


for _name, (_target, _what) in BENCHMARKS.items():
    _make_command(_name, _target, _what)
