"""Process layout of a training run: one process, or FSDP2 across ranks.

Multi-GPU runs are launched with ``torchrun`` (or ``accelerate launch``, which sets the same
``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR`` variables), e.g.::

    torchrun --nnodes 2 --nproc-per-node 8 --node-rank $NODE_RANK --master-addr $MASTER \\
        -m captain_training.sft train --data prepared/ --model Qwen3.5-4B/ --out runs/sft

Strategy ``fsdp2`` shards parameters, gradients and optimizer state across ranks (ZeRO-3
equivalent) with ``torch.distributed.fsdp.fully_shard``: one group per decoder layer, one for
the frozen vision tower, the rest (embeddings, final norm, output layer) at the root. With
``precision="bf16"`` parameters are kept in fp32 and gathered in bf16 for compute; gradients
are reduced in fp32. NCCL needs GPUs; on CPU the same code runs with the gloo backend, which
is how it is tested here (one process).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from captain_training.sft.errors import ConfigError

STRATEGIES = ("auto", "single", "fsdp2")
PRECISIONS = ("bf16", "fp32")


@dataclass
class DistContext:
    """Where this process sits in the run.

    Attributes:
        rank, world_size, local_rank: from torchrun's environment (0, 1, 0 for one process).
        device: the device this rank computes on.
        strategy: ``"single"`` or ``"fsdp2"``.
        initialized_here: whether :func:`setup_distributed` created the process group.
    """

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    strategy: str
    initialized_here: bool = False

    @property
    def is_main(self) -> bool:
        """True on rank 0, which writes logs, metrics and checkpoint metadata."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when a process group is in use."""
        return self.strategy == "fsdp2"

    def barrier(self) -> None:
        """Wait for every rank (no-op for one process)."""
        if self.distributed:
            dist.barrier()

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of ``values`` over ranks."""
        if not self.distributed:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.tolist()

    def max(self, values: list[float]) -> list[float]:
        """Element-wise maximum of ``values`` over ranks."""
        if not self.distributed:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.tolist()

    def close(self) -> None:
        """Destroy the process group if this module created it."""
        if self.initialized_here and dist.is_initialized():
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def resolve_device(device: str, local_rank: int) -> torch.device:
    """``"auto"`` -> this rank's GPU if CUDA is available, else the CPU."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device 'cuda' requested but CUDA is not available; use --device cpu or auto")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    if device == "cpu":
        return torch.device("cpu")
    raise ConfigError(f"device {device!r} is not one of: auto, cuda, cpu")


def setup_distributed(strategy: str = "auto", device: str = "auto") -> DistContext:
    """Read torchrun's environment, pick the device, and create the process group if needed."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy {strategy!r} is not one of: {', '.join(STRATEGIES)}")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if strategy == "auto":
        strategy = "fsdp2" if world_size > 1 else "single"
    if strategy == "single" and world_size > 1:
        raise ConfigError(f"strategy 'single' cannot run {world_size} ranks; use --strategy fsdp2 (or auto)")
    torch_device = resolve_device(device, local_rank)
    initialized_here = False
    if strategy == "fsdp2" and not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        backend = "nccl" if torch_device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, rank=rank, world_size=world_size)
        initialized_here = True
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=torch_device,
                       strategy=strategy, initialized_here=initialized_here)


def apply_fsdp2(wrapper: torch.nn.Module, ctx: DistContext, precision: str) -> torch.nn.Module:
    """Shard a ``SupervisedLM`` with FSDP2: decoder layers, the vision tower (VLMs), then the root."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r} is not one of: {', '.join(PRECISIONS)}")
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    if precision == "bf16":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        policy = MixedPrecisionPolicy()
    from captain_training.models.family import decoder_layers, vision_tower

    inner: Any = wrapper.model
    for layer in decoder_layers(inner):
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    tower = vision_tower(inner)
    if tower is not None:
        fully_shard(tower, mesh=mesh, mp_policy=policy)
    fully_shard(wrapper, mesh=mesh, mp_policy=policy)
    return wrapper
