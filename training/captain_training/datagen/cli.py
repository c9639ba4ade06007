"""``captain datagen``: episode records of the harness -> CaPtain-SFT-Data rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def datagen(
    episodes: Annotated[Path, typer.Argument(help="Directory of episode record files (*.jsonl, one per episode).")],
    out: Annotated[Path, typer.Option(help="Row file to write (JSONL).")],
    mode: Annotated[str, typer.Option(help="per-request (one row per request) or packed (prefix-packed rows).")]
    = "per-request",
    max_packed: Annotated[int, typer.Option(help="Most requests per packed row.")] = 8,
    include_unsuccessful: Annotated[bool, typer.Option(help="Also use episodes without host success.")] = False,
    subset: Annotated[str, typer.Option(help="meta.subset of rows whose records set none.")] = "harness",
    image_prefix: Annotated[str, typer.Option(help="Prefix for relative image paths in the rows.")] = "",
    mask_loops: Annotated[bool, typer.Option(help="Leave requests with repeated execution failures or recovery "
                                                  "loops unsupervised (w_t = 0).")] = True,
) -> None:
    """Turn teacher episodes recorded by the harness into SFT rows (same format as the released data)."""
    from captain_training.datagen.build import generate_rows
    from captain_training.sft.errors import SFTError

    try:
        result = generate_rows(episodes, out, mode=mode, max_packed=max_packed,
                               include_unsuccessful=include_unsuccessful, subset=subset, image_prefix=image_prefix,
                               mask_loops=mask_loops)
    except SFTError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(f"{result.n_rows} rows from {result.n_requests} requests of "
               f"{result.n_episodes - result.n_episodes_skipped_unsuccessful} episodes "
               f"({result.n_episodes_skipped_unsuccessful} unsuccessful skipped) -> {out}")
    if mask_loops:
        typer.echo(f"w_t = 0 detector: {result.n_masked_repeated_failure} request(s) with repeated execution "
                   f"failures, {result.n_masked_recovery_loop} in recovery loops left unsupervised")
    typer.echo(json.dumps(result.to_dict()))
