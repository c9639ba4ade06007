"""Pushing the trainer's weights to the policy servers after each optimiser step.

Two protocols, chosen by ``endpoint.weight_sync``:

* ``collective_rpc`` (default; vLLM): the server runs with ``VLLM_SERVER_DEV_MODE=1`` and
  ``--worker-extension-cls captain_training.rl.weight_sync.PolicyWeightLoader``. The
  trainer writes ``sync/policy_v<n>.pt`` on storage every server can read and calls
  ``POST <server root>/collective_rpc`` with ``{"method": "captain_load_policy_weights",
  "args": [path, version]}``; every vLLM worker (each tensor-parallel rank) loads the
  state dict and hands it to its model's ``load_weights``, which shards it. The local
  endpoint (``endpoint.py``) answers the same call, so the offline path runs the same client.
* ``load_weights``: ``POST <base_url>/load_weights`` with ``{"path", "version"}`` (a server
  of one's own, or the local endpoint).

The state dict has the trainer model's (Hugging Face) parameter names; vLLM's model
loaders map those names to their own, as when loading a checkpoint.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from captain_training.rl.errors import RLError

#: The worker method the trainer calls through ``/collective_rpc``.
SYNC_METHOD = "captain_load_policy_weights"
#: ``endpoint.weight_sync`` choices.
PROTOCOLS = ("collective_rpc", "load_weights")


def load_state_file(path: str | Path) -> dict[str, Any]:
    """The state dict saved at ``path`` (tensors only, loaded on the CPU).

    Raises:
        RLError: the file is missing or not a state dict of tensors.
    """
    import torch

    file = Path(path)
    if not file.is_file():
        raise RLError(f"no weights at {file}: the trainer writes sync/policy_v<n>.pt on storage the server "
                      "must also see (a shared filesystem on a cluster)")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for truncated or foreign files
        raise RLError(f"cannot load the state dict {file}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise RLError(f"{file} is not a state dict of tensors")
    return state


class PolicyWeightLoader:
    """vLLM worker extension (``--worker-extension-cls``) that loads a new policy.

    vLLM mixes this class into each GPU worker, so ``self.model_runner.model`` is the
    served model; its ``load_weights(weights=...)`` takes ``(name, tensor)`` pairs with
    checkpoint names and copies (and, under tensor parallelism, shards) them in place.
    """

    model_runner: Any  # provided by the vLLM worker this class is mixed into

    def captain_load_policy_weights(self, path: str, version: str) -> dict[str, Any]:
        """Load the state dict at ``path`` as policy ``version``; returns what was loaded."""
        import torch

        state = load_state_file(path)
        model = self.model_runner.model
        device = next(model.parameters()).device
        model.load_weights(weights=((name, tensor.to(device)) for name, tensor in state.items()))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return {"version": int(version), "tensors": len(state)}


def server_root(base_url: str) -> str:
    """``http://host:8000/v1`` -> ``http://host:8000`` (``/collective_rpc`` is not under ``/v1``)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _post(url: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise RLError(f"weight sync: {url} answered {exc.code}: {detail}") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise RLError(f"weight sync: {url} failed ({exc}); the server must accept new weights after each "
                      "optimiser step") from exc


def push_weights(base_url: str, path: str | Path, version: int, protocol: str = "collective_rpc",
                 timeout_s: float = 600.0) -> dict[str, Any]:
    """Tell the server at ``base_url`` (API root, e.g. ``http://host:8000/v1``) to load the
    state dict at ``path`` as policy ``version``; returns the server's answer.

    Raises:
        RLError: an unknown protocol, an unreachable server, a refusal, or (collective_rpc)
            a worker that reports another version.
    """
    if protocol not in PROTOCOLS:
        raise RLError(f"endpoint.weight_sync {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    path = str(Path(path).resolve())
    if protocol == "load_weights":
        return _post(base_url.rstrip("/") + "/load_weights", {"path": path, "version": int(version)}, timeout_s)
    url = server_root(base_url) + "/collective_rpc"
    answer = _post(url, {"method": SYNC_METHOD, "args": [path, str(int(version))], "timeout": timeout_s},
                   timeout_s)
    results = answer.get("results")
    if not isinstance(results, list) or not results:
        raise RLError(f"weight sync: {url} returned no worker results ({str(answer)[:200]}); start vLLM with "
                      "VLLM_SERVER_DEV_MODE=1 and --worker-extension-cls "
                      "captain_training.rl.weight_sync.PolicyWeightLoader")
    bad = [r for r in results if not isinstance(r, dict) or r.get("version") != int(version)]
    if bad:
        raise RLError(f"weight sync: {len(bad)} of {len(results)} workers did not load version {version}: {bad[:2]}")
    return answer
