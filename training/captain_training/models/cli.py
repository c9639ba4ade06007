"""``captain model build|list`` and ``captain serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Model directories by name: build them offline, list them.")


@app.command("list")
def list_models() -> None:
    """The models `captain model build` knows."""
    from captain_training.models.build import MODELS

    for recipe in MODELS.values():
        typer.echo(f"{recipe.name:<14} {recipe.description}")


@app.command()
def build(
    name: Annotated[str, typer.Argument(help="tiny-qwen3.5, tiny-smollm2 or smollm2-135m (see `captain model list`).")],
    out: Annotated[Path, typer.Option(help="Model directory to write (Hugging Face format).")],
    overwrite: Annotated[bool, typer.Option(help="Replace an existing directory.")] = False,
) -> None:
    """Write a ready-to-train Hugging Face model directory (weights, tokenizer, chat template), offline."""
    from captain_training.models.build import build_model
    from captain_training.models.family import ModelError, model_card

    try:
        path = build_model(name, out, overwrite=overwrite)
    except ModelError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(json.dumps({"model_dir": str(path), **model_card(path)}))
