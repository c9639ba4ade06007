"""``captain rl``: train the policy with the simulator critic, or train / evaluate a critic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Multi-turn RL with the simulator critic.", no_args_is_help=True)


@app.command()
def train(
    config: Annotated[Path, typer.Option(help="RL config file (YAML or JSON); `captain rl schema` lists the keys.")],
    resume: Annotated[bool, typer.Option(help="Continue from the run directory's latest checkpoint.")] = True,
    rounds: Annotated[int | None, typer.Option(help="Run at most this many rounds now (default: up to "
                                                    "total_rounds).")] = None,
) -> None:
    """Run RL rounds: rollouts, critic credit and co-training, the Eq. 8 update, checkpoints, metrics."""
    from captain_training.rl.config import load_config
    from captain_training.rl.errors import RLError
    from captain_training.rl.trainer import train as run_training

    try:
        cfg = load_config(config)
        summary = run_training(cfg, max_rounds=rounds, resume=resume, log=lambda m: typer.echo(m, err=True))
    except RLError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(json.dumps({"config": str(config), "output_dir": summary.output_dir,
                           "first_round": summary.first_round, "last_round": summary.last_round,
                           "rounds_run": summary.rounds_run, "policy_version": summary.policy_version}))


@app.command()
def schema() -> None:
    """Print every RL config key with its type and default (one JSON object per line)."""
    from captain_training.rl.config import schema_rows

    for row in schema_rows():
        typer.echo(json.dumps(row))


@app.command()
def medians(
    data: Annotated[list[Path], typer.Option(help="SFT row files (JSONL); repeatable.")],
    out: Annotated[Path | None, typer.Option(help="Also write the RL config fragment "
                                                  "`rollout: {sft_median_actions: ...}` here (YAML).")] = None,
) -> None:
    """Per-task median physical-action counts of the SFT episodes (the over-median action cost)."""
    import yaml

    from captain_training.rl.checkpoint import atomic_write_bytes
    from captain_training.rl.sft_medians import sft_median_actions
    from captain_training.sft.errors import SFTError

    missing = [str(p) for p in data if not p.is_file()]
    if missing:
        raise typer.BadParameter(f"no such file(s): {', '.join(missing)}", param_hint="--data")
    try:
        table, episodes = sft_median_actions(data)
    except SFTError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    if not table:
        typer.echo("error: no agent rows of successful episodes with meta.suite and meta.task_id", err=True)
        raise typer.Exit(code=1)
    for task, value in table.items():
        typer.echo(f"{task:<24} median {value:g} physical actions over {episodes[task]} episode(s)", err=True)
    if out is not None:
        atomic_write_bytes(out, yaml.safe_dump({"rollout": {"sft_median_actions": table}}, sort_keys=True).encode())
    typer.echo(json.dumps({"sft_median_actions": table, "episodes": episodes}))


@app.command()
def critic(
    data: Annotated[Path, typer.Option(help="Request-state JSONL (episode_id, task, request_index, "
                                            "features, host_success[, group]).")],
    out: Annotated[Path, typer.Option(help="Where to save the trained critic.")] = Path("critic.pt"),
    init: Annotated[Path | None, typer.Option(help="Start from this saved critic.")] = None,
    heldout_fraction: Annotated[float, typer.Option(help="Fraction of episodes held out.")] = 0.2,
    epochs: Annotated[int, typer.Option(help="Passes over the training states.")] = 20,
    batch_size: Annotated[int, typer.Option(help="Request states per AdamW step.")] = 256,
    learning_rate: Annotated[float, typer.Option(help="AdamW learning rate.")] = 1e-3,
    weight_decay: Annotated[float, typer.Option(help="AdamW weight decay.")] = 1e-4,
    seed: Annotated[int, typer.Option(help="Split, initialisation and minibatch seed.")] = 0,
    eval_only: Annotated[bool, typer.Option(help="Evaluate --init on all of --data, no training.")] = False,
    calibration_plot: Annotated[Path | None, typer.Option(help="Write a reliability PNG here.")] = None,
) -> None:
    """Warm-start (or evaluate) the simulator critic on recorded request states."""
    from captain_training.rl.critic import (
        LIBERO_TASK_IDS,
        CriticConfig,
        SimulatorCritic,
        evaluate_critic,
        load_critic,
        load_optimizer,
        save_critic,
        train_critic,
    )
    from captain_training.rl.critic_data import read_jsonl, split_by_episode
    from captain_training.rl.critic_metrics import reliability_bins
    from captain_training.rl.errors import RLError

    try:
        dataset = read_jsonl(data)
        if eval_only:
            if init is None:
                raise RLError("--eval-only needs --init (the critic to evaluate)")
            model = load_critic(init).critic
            report = {f"all_{k}": v for k, v in evaluate_critic(model, dataset).items()}
            eval_set = dataset
        else:
            train_set, eval_set = split_by_episode(dataset, heldout_fraction, seed)
            if init is not None:
                loaded = load_critic(init)
                model = loaded.critic
                opt = load_optimizer(model, loaded.optimizer_state, learning_rate, weight_decay)
                opt, result = train_critic(model, train_set, epochs=epochs, batch_size=batch_size,
                                           optimizer=opt, seed=seed, fit_normalizer=False)
            else:
                extra = sorted(set(dataset.task.tolist()) - set(LIBERO_TASK_IDS))
                model = SimulatorCritic(CriticConfig(task_ids=LIBERO_TASK_IDS + tuple(extra), seed=seed))
                opt, result = train_critic(model, train_set, epochs=epochs, batch_size=batch_size,
                                           learning_rate=learning_rate, weight_decay=weight_decay, seed=seed)
            report = {f"heldout_{k}": v for k, v in evaluate_critic(model, eval_set).items()}
            report["train_s"] = result.duration_s
            report["final_train_loss"] = result.losses[-1]
            save_critic(model, out, optimizer=opt, extra={"data": str(data), "report": report})
            report["saved"] = str(out)
        if calibration_plot is not None:
            from captain_training.eval.plots import plot_calibration

            p = model.value(eval_set.features, eval_set.request_index, eval_set.task)
            plot_calibration(reliability_bins(eval_set.host_success, p), calibration_plot)
            report["calibration_plot"] = str(calibration_plot)
    except RLError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(json.dumps(report))


if __name__ == "__main__":
    app()
