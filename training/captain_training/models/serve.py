"""``captain serve MODEL_DIR``: a local checkpoint as an OpenAI-compatible endpoint.

This is the RL stage's local server (``captain_training.rl.endpoint.LocalPolicyServer``):
``POST /v1/chat/completions`` renders the request with the model directory's chat template,
samples, and answers with the parsed reasoning, content and ``tool_calls`` plus token ids and
per-token log-probabilities (``choices[0].logprobs.content``; returned with every reply, so a
client that asks for them with ``logprobs: true`` gets them); ``GET /v1/models`` and
``/health``. Any model family loads (``family.py``); a text-only model sees each image as its
placeholder text. Streaming is not offered. Then, in another shell::

    captain run --task tabletop/cube_on_plate --seed 3 --base-url http://127.0.0.1:8000/v1 --model MODEL_NAME
    captain eval run --suite tabletop --tasks cube_on_plate --states 0-9 --base-url http://127.0.0.1:8000/v1 \\
        --model MODEL_NAME --out results.jsonl

The served name defaults to the directory's name. The server binds to loopback only.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer


def endpoint_config(model_dir: Path, *, port: int = 8000, served_model_name: str | None = None,
                    max_new_tokens: int = 1024, max_prompt_tokens: int | None = None, seed: int = 0,
                    device: str = "cpu", threads: int | None = None) -> Any:
    """The ``EndpointConfig`` of a served directory; the prompt limit defaults to the model's
    context (``max_position_embeddings``) minus ``max_new_tokens``."""
    from captain_training.models.family import read_config
    from captain_training.rl.endpoint import EndpointConfig

    if max_prompt_tokens is None:
        config = read_config(model_dir)
        text_config = getattr(config, "text_config", None) or config
        context = int(getattr(text_config, "max_position_embeddings", 32768 + max_new_tokens))
        max_prompt_tokens = max(1, context - max_new_tokens)
    return EndpointConfig(model_dir=str(model_dir), served_model_name=served_model_name or Path(model_dir).name,
                          port=port, max_new_tokens=max_new_tokens, max_prompt_tokens=max_prompt_tokens, seed=seed,
                          device=device, threads=threads)


def serve(
    model_dir: Annotated[Path, typer.Argument(help="Local model directory (Hugging Face format, with chat template).")],
    port: Annotated[int, typer.Option(help="TCP port on 127.0.0.1 (0: a free one).")] = 8000,
    served_model_name: Annotated[str | None, typer.Option(
        "--served-model-name", help="Model name clients pass as --model (default: the directory's name).")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="Most tokens sampled per request.")] = 1024,
    max_prompt_tokens: Annotated[int | None, typer.Option(
        help="Longest prompt accepted (default: the model's context minus --max-new-tokens).")] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    threads: Annotated[int | None, typer.Option(help="torch intra-op threads (default: torch's choice).")] = None,
) -> None:
    """Serve a local model directory as an OpenAI-compatible endpoint (the server RL uses); Ctrl-C stops it."""
    from captain_training.models.family import ModelError
    from captain_training.rl.endpoint import LocalPolicyServer
    from captain_training.rl.errors import RLError

    try:
        config = endpoint_config(model_dir, port=port, served_model_name=served_model_name,
                                 max_new_tokens=max_new_tokens, max_prompt_tokens=max_prompt_tokens, seed=seed,
                                 device=device, threads=threads)
        server = LocalPolicyServer(config)
    except (ModelError, RLError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    typer.echo(json.dumps({"base_url": server.base_url, "model": config.served_model_name,
                           "model_dir": str(model_dir), "max_prompt_tokens": config.max_prompt_tokens,
                           "max_new_tokens": config.max_new_tokens}), err=False)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        signal.signal(signal.SIGTERM, previous)
        typer.echo(f"served {server.requests_served} request(s), {server.tokens_generated} token(s)", err=True)
