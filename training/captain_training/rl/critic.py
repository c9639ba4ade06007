"""The simulator critic V_phi(s, t) (paper Eq. 3-4, Appendix A.2).

An ensemble of five MLPs (three hidden layers of 256 units, ReLU) over the input
``[x(s_t); t; onehot(task)]``; the members' logits are averaged and passed through a
sigmoid, which gives the predicted probability of host success. The 36 features and the
request index are standardised with a mean and standard deviation fitted on the warm-start
data and stored with the model (buffers ``input_mean`` / ``input_std``), so a saved critic
is self-contained. The request index t is 1-based.

Training minimises the binary cross-entropy of V against the episode's host success
(Eq. 4) with AdamW: ``train_critic`` for the warm start (minibatch epochs) and
``cotrain_critic`` for the online update after each round (a few full-batch steps on
all request states of the round).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from captain_training.rl.checkpoint import atomic_torch_save
from captain_training.rl.critic_data import CriticDataset
from captain_training.rl.critic_metrics import critic_report
from captain_training.rl.errors import CriticError
from captain_training.rl.features import N_FEATURES

#: The four LIBERO training suites, in the order of the task one-hot.
LIBERO_SUITES: tuple[str, ...] = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
#: The 40 LIBERO task ids (``suite/index``), the default task vocabulary of the critic.
LIBERO_TASK_IDS: tuple[str, ...] = tuple(f"{s}/{i}" for s in LIBERO_SUITES for i in range(10))

_FORMAT_VERSION = 1


@dataclass(frozen=True)
class CriticConfig:
    """Shape of the critic.

    Attributes:
        task_ids: task vocabulary of the one-hot, in column order.
        n_features: width of x(s) (36).
        n_members: ensemble size (5).
        hidden_units: width of each hidden layer (256).
        hidden_layers: number of hidden layers (3).
        seed: seed of the weight initialisation.
    """

    task_ids: tuple[str, ...] = LIBERO_TASK_IDS
    n_features: int = N_FEATURES
    n_members: int = 5
    hidden_units: int = 256
    hidden_layers: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if len(set(self.task_ids)) != len(self.task_ids) or not self.task_ids:
            raise CriticError("task_ids must be a non-empty list of distinct task ids")
        for name in ("n_features", "n_members", "hidden_units", "hidden_layers"):
            if int(getattr(self, name)) < 1:
                raise CriticError(f"CriticConfig.{name} must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for checkpoints)."""
        d = asdict(self)
        d["task_ids"] = list(self.task_ids)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CriticConfig:
        """Inverse of ``to_dict``; unknown keys are an error naming the valid ones."""
        valid = set(cls.__dataclass_fields__)
        unknown = set(data) - valid
        if unknown:
            raise CriticError(f"unknown critic config keys {sorted(unknown)}; valid keys: {sorted(valid)}")
        data = dict(data)
        if "task_ids" in data:
            data["task_ids"] = tuple(data["task_ids"])
        return cls(**data)


class _StackedLinear(nn.Module):
    """``n_members`` independent linear layers applied in one batched matmul."""

    def __init__(self, n_members: int, in_features: int, out_features: int, generator: torch.Generator):
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        w = (torch.rand(n_members, in_features, out_features, generator=generator) * 2 - 1) * bound
        b = (torch.rand(n_members, 1, out_features, generator=generator) * 2 - 1) * bound
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (M, N, in)
        return torch.bmm(x, self.weight) + self.bias  # faster than baddbmm on CPU


class SimulatorCritic(nn.Module):
    """V_phi(s, t) = sigmoid(mean_k f_k([x(s); t; onehot(task)]))."""

    def __init__(self, config: CriticConfig | None = None):
        super().__init__()
        self.config = config or CriticConfig()
        cfg = self.config
        self._task_index = {t: i for i, t in enumerate(cfg.task_ids)}
        gen = torch.Generator().manual_seed(int(cfg.seed))
        in_width = cfg.n_features + 1 + len(cfg.task_ids)
        widths = [in_width] + [cfg.hidden_units] * cfg.hidden_layers + [1]
        self.layers = nn.ModuleList(
            _StackedLinear(cfg.n_members, a, b, gen) for a, b in itertools.pairwise(widths)
        )
        self.register_buffer("input_mean", torch.zeros(cfg.n_features + 1))
        self.register_buffer("input_std", torch.ones(cfg.n_features + 1))

    # ------------------------------------------------------------------ inputs
    def task_indices(self, task: str | Sequence[str] | np.ndarray, n: int) -> torch.Tensor:
        """Column indices of the task one-hot; a single task id is broadcast to n rows."""
        names = [task] * n if isinstance(task, str) else [str(t) for t in task]
        if len(names) != n:
            raise CriticError(f"got {len(names)} task ids for {n} request states")
        try:
            return torch.tensor([self._task_index[t] for t in names], dtype=torch.long)
        except KeyError as exc:
            raise CriticError(f"task {exc.args[0]!r} is not in the critic's task vocabulary "
                              f"({len(self.config.task_ids)} ids, e.g. {list(self.config.task_ids[:4])}); "
                              "build the critic with CriticConfig(task_ids=...) that lists it") from None

    def encode(self, features: np.ndarray | torch.Tensor, request_index: np.ndarray | torch.Tensor | int,
               task: str | Sequence[str] | np.ndarray) -> torch.Tensor:
        """The standardised network input, shape (N, 36 + 1 + n_tasks)."""
        device = self.input_mean.device
        x = torch.as_tensor(np.asarray(features, dtype=np.float32) if not torch.is_tensor(features)
                            else features, dtype=torch.float32, device=device)
        if x.ndim == 1:
            x = x[None, :]
        if x.shape[1] != self.config.n_features:
            raise CriticError(f"features have {x.shape[1]} columns, the critic expects "
                              f"{self.config.n_features}")
        n = x.shape[0]
        t = torch.as_tensor(np.asarray(request_index, dtype=np.float32) if not torch.is_tensor(request_index)
                            else request_index, dtype=torch.float32, device=device).reshape(-1)
        if t.numel() == 1 and n != 1:
            t = t.expand(n)
        if t.numel() != n:
            raise CriticError(f"got {t.numel()} request indices for {n} feature rows")
        raw = torch.cat([x, t[:, None]], dim=1)
        z = (raw - self.input_mean) / self.input_std
        onehot = torch.zeros(n, len(self.config.task_ids), device=device)
        onehot[torch.arange(n, device=device), self.task_indices(task, n).to(device)] = 1.0
        return torch.cat([z, onehot], dim=1)

    def fit_normalizer(self, features: np.ndarray, request_index: np.ndarray) -> None:
        """Set the stored input mean / std from data (constant columns keep std 1)."""
        raw = np.concatenate([np.asarray(features, dtype=np.float64).reshape(-1, self.config.n_features),
                              np.asarray(request_index, dtype=np.float64).reshape(-1, 1)], axis=1)
        if raw.shape[0] == 0:
            raise CriticError("cannot fit the critic's input normaliser on an empty dataset")
        mean = raw.mean(axis=0)
        std = raw.std(axis=0)
        std = np.where(std > 1e-6, std, 1.0)
        self.input_mean.copy_(torch.as_tensor(mean, dtype=torch.float32))
        self.input_std.copy_(torch.as_tensor(std, dtype=torch.float32))

    # ------------------------------------------------------------------ outputs
    def member_logits_from_input(self, inputs: torch.Tensor) -> torch.Tensor:
        """Logits of every member, shape (n_members, N)."""
        h = inputs.unsqueeze(0).expand(self.config.n_members, -1, -1)
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = torch.relu(h)
        return h.squeeze(-1)

    def logits(self, features: np.ndarray | torch.Tensor, request_index: np.ndarray | torch.Tensor | int,
               task: str | Sequence[str] | np.ndarray) -> torch.Tensor:
        """Ensemble-mean logit, shape (N,)."""
        return self.member_logits_from_input(self.encode(features, request_index, task)).mean(dim=0)

    forward = logits

    @torch.no_grad()
    def value(self, features: np.ndarray, request_index: np.ndarray | int,
              task: str | Sequence[str] | np.ndarray) -> np.ndarray:
        """V(s, t): predicted probability of host success, float64 array (N,)."""
        was_training = self.training
        self.eval()
        try:
            return torch.sigmoid(self.logits(features, request_index, task)).double().cpu().numpy()
        finally:
            self.train(was_training)


# ---------------------------------------------------------------------- training
@dataclass
class CriticTrainResult:
    """Losses of a training call: mean BCE per epoch (warm start) or per step (co-training)."""

    losses: list[float] = field(default_factory=list)
    duration_s: float = 0.0


def make_optimizer(critic: SimulatorCritic, learning_rate: float = 1e-3,
                   weight_decay: float = 1e-4) -> torch.optim.AdamW:
    """The critic's AdamW optimiser."""
    return torch.optim.AdamW(critic.parameters(), lr=learning_rate, weight_decay=weight_decay)


def _bce(critic: SimulatorCritic, inputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logit = critic.member_logits_from_input(inputs).mean(dim=0)
    return nn.functional.binary_cross_entropy_with_logits(logit, y)


def train_critic(critic: SimulatorCritic, data: CriticDataset, *, epochs: int = 20, batch_size: int = 256,
                 optimizer: torch.optim.Optimizer | None = None, learning_rate: float = 1e-3,
                 weight_decay: float = 1e-4, seed: int = 0, fit_normalizer: bool = True
                 ) -> tuple[torch.optim.Optimizer, CriticTrainResult]:
    """Warm start: minibatch AdamW epochs of BCE against host success (Eq. 4).

    Args:
        critic: the critic to train (modified in place).
        data: request states with their episode's host success.
        epochs: passes over the data.
        batch_size: request states per step.
        optimizer: an existing optimiser to continue (its state is kept); a new AdamW otherwise.
        learning_rate / weight_decay: of a new AdamW.
        seed: minibatch order.
        fit_normalizer: fit the stored input standardisation on ``data`` first.

    Returns:
        The optimiser (keep it for co-training) and the per-epoch mean losses.
    """
    import time

    if len(data) == 0:
        raise CriticError("cannot train the critic on an empty dataset")
    start = time.perf_counter()
    if fit_normalizer:
        critic.fit_normalizer(data.features, data.request_index)
    opt = optimizer or make_optimizer(critic, learning_rate, weight_decay)
    inputs = critic.encode(data.features, data.request_index, data.task)
    y = torch.as_tensor(data.host_success, dtype=torch.float32, device=inputs.device)
    gen = torch.Generator().manual_seed(int(seed))
    result = CriticTrainResult()
    critic.train()
    n = len(data)
    for _ in range(int(epochs)):
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for lo in range(0, n, batch_size):
            idx = order[lo:lo + batch_size].to(inputs.device)
            opt.zero_grad(set_to_none=True)
            loss = _bce(critic, inputs[idx], y[idx])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * idx.numel()
        result.losses.append(total / n)
    result.duration_s = time.perf_counter() - start
    return opt, result


def cotrain_critic(critic: SimulatorCritic, optimizer: torch.optim.Optimizer, data: CriticDataset,
                   steps: int = 2) -> CriticTrainResult:
    """Online co-training after a round: ``steps`` full-batch AdamW steps on all its request states.

    The input normaliser is not refitted, so values stay comparable across rounds.
    """
    import time

    if len(data) == 0:
        raise CriticError("cannot co-train the critic on an empty round")
    start = time.perf_counter()
    inputs = critic.encode(data.features, data.request_index, data.task)
    y = torch.as_tensor(data.host_success, dtype=torch.float32, device=inputs.device)
    critic.train()
    result = CriticTrainResult()
    for _ in range(int(steps)):
        optimizer.zero_grad(set_to_none=True)
        loss = _bce(critic, inputs, y)
        loss.backward()
        optimizer.step()
        result.losses.append(float(loss.detach()))
    result.duration_s = time.perf_counter() - start
    return result


def evaluate_critic(critic: SimulatorCritic, data: CriticDataset, n_bins: int = 10) -> dict[str, float]:
    """AUC, within-group AUC (if the data has groups), Brier, ECE on a dataset."""
    p = critic.value(data.features, data.request_index, data.task)
    return critic_report(data.host_success, p, groups=data.group, n_bins=n_bins)


# ---------------------------------------------------------------------- files
@dataclass
class LoadedCritic:
    """What ``load_critic`` returns."""

    critic: SimulatorCritic
    optimizer_state: dict[str, Any] | None
    extra: dict[str, Any]


def save_critic(critic: SimulatorCritic, path: str | Path, optimizer: torch.optim.Optimizer | None = None,
                extra: dict[str, Any] | None = None) -> Path:
    """Save config, weights, normaliser (and optimiser state) atomically to ``path``."""
    payload = {
        "format": "captain-critic",
        "format_version": _FORMAT_VERSION,
        "config": critic.config.to_dict(),
        "state_dict": critic.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "extra": dict(extra or {}),
    }
    return atomic_torch_save(path, payload)


def load_critic(path: str | Path) -> LoadedCritic:
    """Load a critic saved by ``save_critic``."""
    path = Path(path)
    if not path.is_file():
        raise CriticError(f"no critic checkpoint at {path}")
    payload = torch.load(path, map_location="cpu", weights_only=True)  # move with .to(device) after loading
    if not isinstance(payload, dict) or payload.get("format") != "captain-critic":
        raise CriticError(f"{path} is not a critic checkpoint written by save_critic")
    if payload.get("format_version") != _FORMAT_VERSION:
        raise CriticError(f"{path} has critic format version {payload.get('format_version')}, "
                          f"this code reads version {_FORMAT_VERSION}")
    critic = SimulatorCritic(CriticConfig.from_dict(payload["config"]))
    critic.load_state_dict(payload["state_dict"])
    return LoadedCritic(critic, payload.get("optimizer"), dict(payload.get("extra") or {}))


def load_optimizer(critic: SimulatorCritic, state: dict[str, Any] | None, learning_rate: float = 1e-3,
                   weight_decay: float = 1e-4) -> torch.optim.AdamW:
    """An AdamW for ``critic``, restored from a saved state when one is given."""
    opt = make_optimizer(critic, learning_rate, weight_decay)
    if state is not None:
        opt.load_state_dict(state)
    return opt
