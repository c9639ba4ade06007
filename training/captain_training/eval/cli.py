"""``captain eval``: run a policy over (suite, task, state) triples, and compare two policies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Evaluate policies and compare them on paired episodes.", no_args_is_help=True)


@app.command()
def run(
    suite: Annotated[str, typer.Option(help="Benchmark suite, e.g. libero_goal or tabletop.")] = "libero_goal",
    tasks: Annotated[str | None, typer.Option(help="Task indices or names, e.g. 0-9 (default: the whole suite).")]
    = None,
    states: Annotated[str, typer.Option(help="Official initial states, e.g. 11-16 (the held-out ones).")] = "11-16",
    layout: Annotated[str, typer.Option(help="Starts: official, wide, pro_swap, pro_shift (pro_shift:x0.3).")]
    = "official",
    seeds: Annotated[str | None, typer.Option(help="Randomized starts, one per seed, e.g. 0-9 (not --states).")]
    = None,
    driver_option: Annotated[list[str] | None, typer.Option("--driver-option",
                                                            help="Driver config key=value (repeatable).")] = None,
    policy: Annotated[str, typer.Option(help="Policy name (openai, teacher, replay, module:factory).")] = "openai",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible API root of the policy.")] = None,
    model: Annotated[str | None, typer.Option(help="Served model name.")] = None,
    policy_option: Annotated[list[str] | None, typer.Option("--policy-option", "-p",
                                                            help="Policy option key=value (repeatable).")] = None,
    out: Annotated[Path, typer.Option(help="Result JSONL to write (one line per episode).")] = Path("results.jsonl"),
    records: Annotated[Path, typer.Option(help="Episode records root.")] = Path("runs/eval"),
    workers: Annotated[int, typer.Option(help="Parallel episode processes.")] = 1,
    backend: Annotated[str | None, typer.Option(help="Backend factory module:function (default: the "
                                                     "registered driver of the suite).")] = None,
    max_requests: Annotated[int, typer.Option(help="Request budget per episode.")] = 60,
    max_actions: Annotated[int, typer.Option(help="Physical-action budget per episode.")] = 150,
    max_wall_s: Annotated[float, typer.Option(help="Wall-time budget per episode, s.")] = 1080.0,
    stacks: Annotated[str | None, typer.Option(help="Run on running bringups: namespaces (/robot1,/robot2) or a "
                                                    "file listing them.")] = None,
    system_prompt: Annotated[Path | None, typer.Option(help="Harness prompt before TASK.md: a model's SFT row "
                                                       "(.jsonl/.json) or a text file (default: the harness's).")]
    = None,
    compact_at_tokens: Annotated[int | None, typer.Option(help="Compact older turns past this estimated prompt "
                                                          "size, tokens (default: the harness's, 60000).")] = None,
    task_md_sections: Annotated[str | None, typer.Option(help="Send only these TASK.md sections, comma-separated "
                                                         "(e.g. 'Task,Success standard', as datagen.compact "
                                                         "trains them; default: all).")] = None,
) -> None:
    """Run a policy on every (suite, task, state) and write the result JSONL that `compare` reads."""
    from captain_harness.core.episode.errors import EpisodeError as StartError
    from captain_harness.core.episode.starts import parse_driver_options
    from captain_training.eval.runner import EvalSpec, run_evaluation

    try:
        driver_options = parse_driver_options(driver_option or [])
    except StartError as exc:
        raise typer.BadParameter(str(exc), param_hint="--driver-option") from exc

    options: dict[str, object] = {}
    for item in policy_option or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--policy-option {item!r} must look like key=value")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    if base_url:
        options["base_url"] = base_url
    if model:
        options["model"] = model
    prompt = None
    if system_prompt is not None:
        from captain_harness.core.episode.errors import EpisodeError
        from captain_harness.core.episode.prompt import load_system_prompt

        try:
            prompt = load_system_prompt(system_prompt)
        except EpisodeError as exc:
            raise typer.BadParameter(str(exc), param_hint="--system-prompt") from exc
    if compact_at_tokens is not None and compact_at_tokens <= 0:
        raise typer.BadParameter(f"must be > 0, got {compact_at_tokens}", param_hint="--compact-at-tokens")
    sections = None
    if task_md_sections is not None:
        sections = tuple(s.strip() for s in task_md_sections.split(",") if s.strip())
        if not sections:
            raise typer.BadParameter("name at least one section", param_hint="--task-md-sections")
    spec = EvalSpec(suite=suite, tasks=tasks, states=states, policy=policy, policy_options=options,
                    records=str(records), workers=workers, backend=backend, max_requests=max_requests,
                    max_physical_actions=max_actions, max_wall_time_s=max_wall_s, system_prompt=prompt,
                    compact_at_tokens=compact_at_tokens, task_md_sections=sections, layout=layout, seeds=seeds,
                    driver_options=driver_options)
    if stacks is not None:
        from dataclasses import replace

        from captain_harness.core.episode.stacks import parse_stacks

        try:
            spec = replace(spec, stacks=tuple(parse_stacks(stacks)))
        except (ValueError, OSError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--stacks") from exc
    try:
        summary = run_evaluation(spec, out)
    except (ValueError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(json.dumps(summary))


@app.command()
def compare(
    results_a: Annotated[Path, typer.Argument(help="Result JSONL of policy A (the baseline).")],
    results_b: Annotated[Path, typer.Argument(help="Result JSONL of policy B.")],
    metric: Annotated[list[str] | None, typer.Option(
        help="Metric to compare (repeatable; default host_success and strict_success).")] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap resamples of task clusters.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    confidence: Annotated[float, typer.Option(help="Confidence level of the interval.")] = 0.95,
    allow_unpaired: Annotated[bool, typer.Option(help="Drop triples present for only one policy.")] = False,
    label_a: Annotated[str, typer.Option(help="Name of policy A in the output.")] = "A",
    label_b: Annotated[str, typer.Option(help="Name of policy B in the output.")] = "B",
    plot: Annotated[Path | None, typer.Option(help="Write a per-suite success PNG here.")] = None,
) -> None:
    """Paired comparison on identical (suite, task, init_state) triples: exact McNemar + cluster bootstrap."""
    from rich.console import Console
    from rich.table import Table

    from captain_training.eval.errors import EvalError
    from captain_training.eval.results import read_results
    from captain_training.eval.stats import compare_paired

    metrics = metric or ["host_success", "strict_success"]
    try:
        ra, rb = read_results(results_a), read_results(results_b)
        comparisons = [compare_paired(ra, rb, m, n_boot=n_boot, seed=seed, confidence=confidence,
                                      allow_unpaired=allow_unpaired) for m in metrics]
    except EvalError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    table = Table(title=f"{label_b} vs {label_a} (paired)")
    for col in ("metric", "pairs", "tasks", label_a, label_b, "B-A", f"{int(confidence * 100)}% CI",
                "only A", "only B", "McNemar p"):
        table.add_column(col)
    for c in comparisons:
        table.add_row(c.metric, str(c.n_pairs), str(c.n_tasks), f"{100 * c.rate_a:.1f}%",
                      f"{100 * c.rate_b:.1f}%", f"{100 * c.difference:+.1f}",
                      f"[{100 * c.ci_low:+.1f}, {100 * c.ci_high:+.1f}]",
                      str(c.only_a), str(c.only_b), f"{c.p_value:.4g}")
    Console().print(table)
    if plot is not None:
        from captain_training.eval.plots import plot_suite_success

        first = comparisons[0]
        rates = {s: {label_a: v["rate_a"], label_b: v["rate_b"]} for s, v in first.per_suite.items()}
        plot_suite_success(rates, plot, title=f"{first.metric} per suite")
        typer.echo(f"wrote {plot}")
    typer.echo(json.dumps({"label_a": label_a, "label_b": label_b,
                           "comparisons": [c.to_dict() for c in comparisons]}))
