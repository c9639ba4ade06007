"""``captain run`` and ``captain rollout``: typer commands over ``runner.py``.

``run`` streams each request's code and cell outputs (with receipts) and ends with one
JSON line: the outcome. ``rollout`` runs episodes in parallel processes with a progress
bar, prints a summary table, and ends with one JSON line: the summary. ``rollout
--stacks /robot1,/robot2`` sends the episodes to running bringups' ``run_episode``
actions instead (``captain_harness.nodes.stack_client``, imported only then: this module
stays importable without rclpy), with a progress bar per stack.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

_POLICY_HELP = "openai, replay, a registered policy (e.g. teacher) or module:factory"


# Options shared by `captain run` and `captain rollout` (one definition each).
PolicyOpt = Annotated[str, typer.Option(help=_POLICY_HELP)]
BaseUrlOpt = Annotated[str | None, typer.Option(help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")]
ModelOpt = Annotated[str | None, typer.Option(help="served model name")]
TemperatureOpt = Annotated[float | None, typer.Option(help="sampling temperature (default 1.0)")]
TopPOpt = Annotated[float | None, typer.Option(help="nucleus sampling (default 1.0)")]
MaxTokensOpt = Annotated[int | None, typer.Option(help="completion limit per request (default 4096)")]
RecordOpt = Annotated[str | None, typer.Option(help="rows.jsonl or episode folder for --policy replay")]
TokenIdsOpt = Annotated[bool, typer.Option(help="ask the server for token ids and logprobs")]
PolicyOptionOpt = Annotated[list[str] | None, typer.Option("--policy-option", "-p", help="key=value")]
BackendOpt = Annotated[str | None, typer.Option(help="backend factory module:function")]
MaxRequestsOpt = Annotated[int, typer.Option(help="request budget")]
MaxActionsOpt = Annotated[int, typer.Option(help="physical-action budget")]
MaxWallOpt = Annotated[float, typer.Option(help="wall-time budget, s")]
CellTimeoutOpt = Annotated[float, typer.Option(help="time limit of one cell, s")]
IsolationOpt = Annotated[str, typer.Option(help="auto, bwrap or none")]
SystemPromptOpt = Annotated[
    Path | None,
    typer.Option(help="harness prompt before TASK.md: a released model's SFT row (.jsonl/.json) or a text file"),
]


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
    policy: PolicyOpt = "openai",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    max_tokens: MaxTokensOpt = None,
    record: RecordOpt = None,
    token_ids: TokenIdsOpt = False,
    policy_option: PolicyOptionOpt = None,
    out: Annotated[Path, typer.Option(help="records root")] = Path("runs/episodes"),
    backend: BackendOpt = None,
    max_requests: MaxRequestsOpt = 60,
    max_actions: MaxActionsOpt = 150,
    max_wall_s: MaxWallOpt = 1080.0,
    cell_timeout_s: CellTimeoutOpt = 120.0,
    isolation: IsolationOpt = "auto",
    mcap: Annotated[bool, typer.Option(help="also write a rosbag2 bag (MCAP) of the episode")] = False,
    system_prompt: SystemPromptOpt = None,
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
        ("starts re-drawn / not built", f"{summary.get('start_redraws', 0)} / {summary.get('starts_not_built', 0)}"),
        ("mean requests", summary["mean_requests"]),
        ("mean physical actions", summary["mean_physical_actions"]),
        ("mean wall time s", summary["mean_wall_time_s"]),
        ("harness s / request (median)", summary["harness_s_per_request_median"]),
        ("episodes / hour / core", summary["episodes_per_hour_per_core"]),
    ]
    if "stack_failures" in summary:  # --stacks: attempts a stack failed (each retried on another)
        rows.insert(6, ("stack attempts failed", summary["stack_failures"]))
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
    policy: PolicyOpt = "openai",
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    max_tokens: MaxTokensOpt = None,
    record: RecordOpt = None,
    token_ids: TokenIdsOpt = False,
    policy_option: PolicyOptionOpt = None,
    out: Annotated[Path, typer.Option(help="records root")] = Path("runs/rollouts"),
    backend: BackendOpt = None,
    max_requests: MaxRequestsOpt = 60,
    max_actions: MaxActionsOpt = 150,
    max_wall_s: MaxWallOpt = 1080.0,
    cell_timeout_s: CellTimeoutOpt = 120.0,
    isolation: IsolationOpt = "auto",
    subset: Annotated[str, typer.Option(help="meta.subset of the rows")] = "rollout",
    mcap: Annotated[bool, typer.Option(help="also write a rosbag2 bag (MCAP) per episode")] = False,
    system_prompt: SystemPromptOpt = None,
    stacks: Annotated[
        str | None,
        typer.Option(help="run on running bringups instead: namespaces (/robot1,/robot2) or a file listing them"),
    ] = None,
    stack_heartbeat_s: Annotated[
        float, typer.Option(help="with --stacks: silence of a stack's episode runner that marks it dead, s")
    ] = 30.0,
    layout: Annotated[str, typer.Option(help="official, wide, pro_swap, pro_shift (or pro_shift:x0.3)")]
    = "official",
    seeds: Annotated[str | None, typer.Option(help="randomized starts, one per seed, e.g. 0-9 (not --states)")]
    = None,
    driver_option: Annotated[
        list[str] | None, typer.Option("--driver-option", help="driver config key=value (repeatable)")
    ] = None,
) -> None:
    """Run episodes in parallel; print a summary table; end with one JSON line (the summary)."""
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import rollout as run_rollout
    from captain_harness.core.episode.runner import summary_json_line

    plan = start_plan(suite, tasks, states, layout, seeds, driver_option or [])
    task_list, state_list = plan.tasks, plan.states
    spec = PolicySpec(
        policy,
        _policy_options(
            policy, base_url, model, temperature, top_p, max_tokens, record, token_ids, policy_option or []
        ),
    )
    cfg = _config(max_requests, max_actions, max_wall_s, cell_timeout_s, isolation, mcap, subset, system_prompt)
    total = episodes if episodes is not None else plan.episodes
    if stacks is not None and (plan.seeds is not None or plan.driver_options):
        raise typer.BadParameter("--seeds, --layout wide and --driver-option cannot be combined with --stacks: "
                                 "a stack's driver is configured by its own parameters", param_hint="--stacks")
    if stacks is not None:
        stack_list = stack_options(stacks, workers=workers, backend=backend, isolation=isolation,
                                   system_prompt=system_prompt)
        summary = rollout_stacks(task_list, state_list, stacks=stack_list, policy=spec, out_dir=out,
                                 episodes=total, config=cfg, heartbeat_s=stack_heartbeat_s)
        print(_table(summary))
        print(summary_json_line(summary))
        return
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
        seeds=plan.seeds,
        driver_options=plan.driver_options,
    )
    if bar is not None:
        bar.close()
    print(_table(summary))
    print(summary_json_line(summary))


def start_plan(suite: str, tasks: str | None, states: str, layout: str, seeds: str | None,
               driver_option: list[str]) -> Any:
    """The ``StartPlan`` of the batch options (``core/episode/starts.py``); bad input is a
    ``typer.BadParameter`` naming the option."""
    from captain_harness.core.episode.errors import EpisodeError
    from captain_harness.core.episode.starts import parse_driver_options, plan_starts

    try:
        return plan_starts(suite, tasks, states, layout=layout, seeds=seeds,
                           driver_options=parse_driver_options(driver_option))
    except EpisodeError as exc:
        raise typer.BadParameter(str(exc)) from exc


def stack_options(stacks: str, *, workers: int = 1, backend: str | None = None, isolation: str = "auto",
                  system_prompt: Path | None = None) -> list[str]:
    """The namespaces of ``--stacks``; refuses options that a stack sets for itself (its
    parameters), so that none is accepted and ignored."""
    from captain_harness.core.episode.stacks import parse_stacks

    try:
        stack_list = parse_stacks(stacks)
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--stacks") from exc
    refused = [(workers != 1, "--workers", "one episode runs per stack; add stacks to run more at once"),
               (backend is not None, "--backend", "a stack's robot is its harness node's driver"),
               (isolation != "auto", "--isolation", "set the stacks' episode_runner.isolation parameter"),
               (system_prompt is not None, "--system-prompt", "the episode action takes no system prompt")]
    for given, option, why in refused:
        if given:
            raise typer.BadParameter(f"{option} cannot be combined with --stacks: {why}", param_hint=option)
    return stack_list


def rollout_stacks(tasks: list[str], states: list[int], *, stacks: list[str], policy: Any, out_dir: Path,
                   episodes: int, config: Any, heartbeat_s: float = 30.0) -> dict[str, Any]:
    """``rollout`` on running stacks with one progress bar per stack (episodes done there)
    and a line on stderr for each attempt a stack failed (the episode is retried elsewhere)."""
    from captain_harness.nodes.stack_client import StackTimeouts, rollout_on_stacks

    bars: dict[str | None, Any] = {}
    try:
        from tqdm import tqdm

        bars[None] = tqdm(total=episodes, desc="episodes", unit="ep", file=sys.stderr, position=0)
        width = max(len(s) for s in stacks)
        for i, stack in enumerate(stacks):
            bars[stack] = tqdm(desc=f"{stack:<{width}}", unit="ep", file=sys.stderr, position=i + 1)
    except ImportError:
        pass

    def progress(stack: str | None, outcome: dict[str, Any]) -> None:
        for key in {None, stack}:
            bar = bars.get(key)
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"{outcome.get('task')} {outcome.get('outcome')}")

    def failed(stack: str, job: dict[str, Any], error: str) -> None:
        message = f"{job['task']} state {job['init_state']}: attempt failed, retrying elsewhere: {error}"
        bar = bars.get(stack)
        if bar is not None:
            bar.write(message, file=sys.stderr)
            bar.set_postfix_str("failed")
        else:
            sys.stderr.write(message + "\n")

    try:
        return rollout_on_stacks(tasks, states, stacks=stacks, policy=policy, out_dir=out_dir, episodes=episodes,
                                 config=config, progress=progress, on_attempt_failed=failed,
                                 timeouts=StackTimeouts(heartbeat_timeout_s=heartbeat_s))
    finally:
        for bar in bars.values():
            bar.close()


app = typer.Typer(no_args_is_help=True, add_completion=False, help="Run code-as-policy episodes.")
app.command(name="run")(run)
app.command(name="rollout")(rollout)
