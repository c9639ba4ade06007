"""Entry point of the `captain` command.

Every subcommand is declared once in ``SUBCOMMANDS`` as ``(name, "module:attribute",
help)``: the attribute is either a ``typer.Typer`` (a command group such as ``sft``) or a
plain function (a single command such as ``run``). Modules are imported when the CLI
starts; they keep heavy imports (torch, mujoco, rclpy) inside their command functions.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

import typer

SUBCOMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "captain_bringup.cli.demo:demo",
     "One teacher episode on a LIBERO task on the built-in simulator (no GPU, no model)."),
    ("run", "captain_harness.core.episode.cli:run",
     "Run one code-as-policy episode and stream its code and receipts."),
    ("rollout", "captain_harness.core.episode.cli:rollout",
     "Run many episodes in parallel processes and print success statistics."),
    ("bench", "captain_bringup.cli.bench:app",
     "Benchmarks: print a table, then one JSON line of figures."),
    ("bringup", "captain_bringup.cli.bringup:bringup",
     "Run the ROS 2 nodes of sim, xr1_twin or xr1_real, one process per node group."),
    ("dds-clean", "captain_perception.nodes.dds_profile:clean_command",
     "Remove Fast DDS shared-memory files no running process uses (left by killed processes)."),
    ("datagen", "captain_training.datagen.cli:datagen",
     "Turn recorded episodes into CaPtain-SFT-Data rows."),
    ("sft", "captain_training.sft.cli:app",
     "Supervised fine-tuning: validate, prepare, train."),
    ("rl", "captain_training.rl.cli:app",
     "Multi-turn RL with the simulator critic."),
    ("eval", "captain_training.eval.cli:app",
     "Evaluate policies and compare them with paired statistics."),
    ("model", "captain_training.models.cli:app",
     "Model directories by name (tiny-qwen3.5, tiny-smollm2, smollm2-135m), built offline."),
    ("serve", "captain_training.models.serve:serve",
     "Serve a local model directory as an OpenAI-compatible endpoint (the server RL uses)."),
)

app = typer.Typer(
    name="captain",
    help="CaPtain: a code-as-policy robot harness on ROS 2, and the pipeline that post-trains its policy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _unavailable(name: str, reason: str) -> Callable[[], None]:
    def command() -> None:
        typer.echo(f"captain {name} is unavailable on this install: {reason}", err=True)
        raise typer.Exit(code=2)

    command.__doc__ = f"(unavailable: {reason})"
    return command


def _mount(name: str, target: str, help_text: str) -> None:
    module_name, attr = target.split(":")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        app.command(name=name, help=f"{help_text} (unavailable: {exc})")(_unavailable(name, str(exc)))
        return
    if isinstance(obj, typer.Typer):
        app.add_typer(obj, name=name, help=help_text)
    else:
        app.command(name=name, help=help_text)(obj)


for _name, _target, _help in SUBCOMMANDS:
    _mount(_name, _target, _help)


def main() -> None:
    """Console-script entry point."""
    from captain_perception.nodes.dds_profile import use_profile

    use_profile()  # the stack's Fast DDS profile for this process and its children (dds_profile)
    app(prog_name="captain")


if __name__ == "__main__":
    sys.exit(main())
