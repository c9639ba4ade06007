"""``captain run`` and ``captain rollout``: typer commands over ``runner.py``.

``run`` streams each request's code and cell outputs (with receipts) and ends with one
JSON line: the outcome. ``rollout`` runs episodes in parallel processes with a progress
bar, prints a summary table, and ends with one JSON line: the summary.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

_POLICY_HELP = "openai, replay, a registered policy (e.g. teacher) or module:factory"


def _policy_options(policy: str, base_url: str | None, model: str | None, temperature: float | None,
                    top_p: float | None, max_tokens: int | None, record: str | None, token_ids: bool,
                    extra: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if policy == "openai":
        options.update(
            {
                k: v
                for k, v in (
                    ("base_url", base_url),
                    ("model", model),
                    ("temperature", temperature),
                    ("top_p", top_p),
                    ("max_tokens", max_tokens),
                )
                if v is not None
            }
        )
        if token_ids:
            options.update(return_token_ids=True, logprobs=True)
    elif policy == "replay" and record:
        options["record"] = record
    for pair in extra:
        if "=" not in pair:
            raise typer.BadParameter(f"--policy-option {pair!r} must look like key=value")
        key, raw = pair.split("=", 1)
        try:
            options[key] = json.loads(raw)
        except json.JSONDecodeError:
            options[key] = raw
    return options


def _config(
    max_requests: int,
    max_actions: int,
    max_wall_s: float,
    cell_timeout_s: float,
    isolation: str,
    mcap: bool,
    subset: str,
    system_prompt: Path | None = None,
) -> Any:
    from captain_harness.core.budget import BudgetLimits
    from captain_harness.core.episode.errors import EpisodeError
    from captain_harness.core.episode.loop import LoopConfig
    from captain_harness.core.episode.prompt import load_system_prompt
    from captain_harness.core.episode.runner import EpisodeConfig
    from captain_harness.core.episode.sandbox import SandboxConfig

    prompt = None
    if system_prompt is not None:
        try:
            prompt = load_system_prompt(system_prompt)
        except EpisodeError as exc:
            raise typer.BadParameter(str(exc), param_hint="--system-prompt") from exc
    return EpisodeConfig(
        limits=BudgetLimits(max_requests, max_actions, max_wall_s),
        loop=LoopConfig(cell_timeout_s=cell_timeout_s),
        sandbox=SandboxConfig(isolation=isolation),
        mcap=mcap,
        subset=subset,
        system_prompt=prompt,
    )


def _print_event(event: dict[str, Any]) -> None:
    out = sys.stdout
    out.write(
        f"\n=== request {event['request_index']}  (policy {event['policy_s']:.1f} s, "
        f"harness {event['harness_s']:.3f} s)\n"
    )
    if event.get("reasoning"):
        lines = event["reasoning"].strip().splitlines()
        shown = lines[:6] + (["..."] if len(lines) > 6 else [])
        out.write("".join(f"  | {line}\n" for line in shown))
    if event.get("content"):
        out.write(f"{event['content'].strip()}\n")
    for cell in event.get("cells", []):
        out.write(f"--- In [{cell.get('index')}]:\n{cell.get('code', '').rstrip()}\n")
        out.write(f"--- Out:\n{cell.get('output', '').rstrip()}\n")
    out.flush()


def run(
    task: Annotated[str, typer.Option(help="<suite>/<task>, e.g. libero_spatial/0")],
    init_state: Annotated[int, typer.Option(help="official initial state (-1: default)")] = -1,
    seed: Annotated[int | None, typer.Option(help="layout seed")] = None,
    policy: Annotated[str, typer.Option(help=_POLICY_HELP)] = "openai",
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    ] = None,
    model: Annotated[str | None, typer.Option(help="served model name")] = None,
    temperature: Annotated[float | None, typer.Option(help="sampling temperature (default 1.0)")] = None,
    top_p: Annotated[float | None, typer.Option(help="nucleus sampling (default 1.0)")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="completion limit per request (default 4096)")
    ] = None,
    record: Annotated[
        str | None, typer.Option(help="rows.jsonl or episode folder for --policy replay")
    ] = None,
    token_ids: Annotated[bool, typer.Option(help="ask the server for token ids and logprobs")] = False,
    policy_option: Annotated[
        list[str] | None, typer.Option("--policy-option", "-p", help="key=value")
    ] = None,
    out: Annotated[Path, typer.Option(help="records root")] = Path("runs/episodes"),
    backend: Annotated[str | None, typer.Option(help="backend factory module:function")] = None,
    max_requests: Annotated[int, typer.Option(help="request budget")] = 60,
    max_actions: Annotated[int, typer.Option(help="physical-action budget")] = 150,
    max_wall_s: Annotated[float, typer.Option(help="wall-time budget, s")] = 1080.0,
    cell_timeout_s: Annotated[float, typer.Option(help="time limit of one cell, s")] = 120.0,
    isolation: Annotated[str, typer.Option(help="auto, bwrap or none")] = "auto",
    mcap: Annotated[bool, typer.Option(help="also write a rosbag2 bag (MCAP) of the episode")] = False,
    system_prompt: Annotated[
        Path | None,
        typer.Option(help="harness prompt before TASK.md: a released model's SFT row (.jsonl/.json) or a text file"),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="print only the outcome line")] = False,
) -> None:
    """Run one episode; stream each request's code and receipts; end with one JSON line (the outcome)."""
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import run_episode

    spec = PolicySpec(
        policy,
        _policy_options(
            policy, base_url, model, temperature, top_p, max_tokens, record, token_ids, policy_option or []
        ),
    )
    cfg = _config(max_requests, max_actions, max_wall_s, cell_timeout_s, isolation, mcap, "rollout", system_prompt)
    outcome = run_episode(
        task,
        policy=spec,
        out_dir=out,
        backend_factory=backend,
        init_state=init_state,
        seed=seed,
        config=cfg,
        on_event=None if quiet else _print_event,
    )
    if outcome.error and not quiet:
        sys.stderr.write(f"episode error: {outcome.error}\n")
    print(json.dumps(outcome.summary_line()))
    if outcome.outcome == "infrastructure_failure":
        raise typer.Exit(code=3)


def _table(summary: dict[str, Any]) -> str:
    rows = [
        ("episodes", summary["episodes"]),
        ("host success %", 100 * summary["host_success"]),
        ("strict success %", 100 * summary["strict_success"]),
        ("false finish %", 100 * summary["false_finish"]),
        ("missed finish %", 100 * summary["missed_finish"]),
        ("infrastructure failures", summary["infrastructure_failures"]),
        ("mean requests", summary["mean_requests"]),
        ("mean physical actions", summary["mean_physical_actions"]),
        ("mean wall time s", summary["mean_wall_time_s"]),
        ("harness s / request (median)", summary["harness_s_per_request_median"]),
        ("episodes / hour / core", summary["episodes_per_hour_per_core"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{'metric':<{width}}  value", "-" * (width + 12)]
    for key, value in rows:
        shown = "-" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
        lines.append(f"{key:<{width}}  {shown}")
    return "\n".join(lines)


def rollout(
    suite: Annotated[str, typer.Option(help="suite, e.g. libero_spatial")],
    tasks: Annotated[str | None, typer.Option(help="task indices or names, e.g. 0-9 (default: all)")] = None,
    states: Annotated[str, typer.Option(help="initial states, e.g. 11-16")] = "-1",
    episodes: Annotated[int | None, typer.Option(help="episodes to run (default: tasks x states)")] = None,
    workers: Annotated[int, typer.Option(help="parallel worker processes")] = 1,
    policy: Annotated[str, typer.Option(help=_POLICY_HELP)] = "openai",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible API root")] = None,
    model: Annotated[str | None, typer.Option(help="served model name")] = None,
    temperature: Annotated[float | None, typer.Option(help="sampling temperature")] = None,
    top_p: Annotated[float | None, typer.Option(help="nucleus sampling")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="completion limit per request")] = None,
    record: Annotated[str | None, typer.Option(help="recording for --policy replay")] = None,
    token_ids: Annotated[bool, typer.Option(help="ask the server for token ids and logprobs")] = False,
    policy_option: Annotated[
        list[str] | None, typer.Option("--policy-option", "-p", help="key=value")
    ] = None,
    out: Annotated[Path, typer.Option(help="records root")] = Path("runs/rollouts"),
    backend: Annotated[str | None, typer.Option(help="backend factory module:function")] = None,
    max_requests: Annotated[int, typer.Option(help="request budget")] = 60,
    max_actions: Annotated[int, typer.Option(help="physical-action budget")] = 150,
    max_wall_s: Annotated[float, typer.Option(help="wall-time budget, s")] = 1080.0,
    cell_timeout_s: Annotated[float, typer.Option(help="time limit of one cell, s")] = 120.0,
    isolation: Annotated[str, typer.Option(help="auto, bwrap or none")] = "auto",
    subset: Annotated[str, typer.Option(help="meta.subset of the rows")] = "rollout",
    mcap: Annotated[bool, typer.Option(help="also write a rosbag2 bag (MCAP) per episode")] = False,
    system_prompt: Annotated[
        Path | None,
        typer.Option(help="harness prompt before TASK.md: a released model's SFT row (.jsonl/.json) or a text file"),
    ] = None,
) -> None:
    """Run episodes in parallel; print a summary table; end with one JSON line (the summary)."""
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import parse_range, suite_tasks, summary_json_line
    from captain_harness.core.episode.runner import rollout as run_rollout

    try:
        task_list = suite_tasks(suite, tasks)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    state_list = parse_range(states)
    spec = PolicySpec(
        policy,
        _policy_options(
            policy, base_url, model, temperature, top_p, max_tokens, record, token_ids, policy_option or []
        ),
    )
    cfg = _config(max_requests, max_actions, max_wall_s, cell_timeout_s, isolation, mcap, subset, system_prompt)
    total = episodes if episodes is not None else len(task_list) * max(1, len(state_list))
    bar = None
    try:
        from tqdm import tqdm

        bar = tqdm(total=total, desc="episodes", unit="ep", file=sys.stderr)
    except ImportError:
        pass

    def progress(outcome: dict[str, Any]) -> None:
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"{outcome.get('task')} {outcome.get('outcome')}")

    summary = run_rollout(
        task_list,
        state_list,
        policy=spec,
        out_dir=out,
        backend_factory=backend,
        episodes=total,
        workers=workers,
        config=cfg,
        progress=progress,
    )
    if bar is not None:
        bar.close()
    print(_table(summary))
    print(summary_json_line(summary))


app = typer.Typer(no_args_is_help=True, add_completion=False, help="Run code-as-policy episodes.")
app.command(name="run")(run)
app.command(name="rollout")(rollout)
