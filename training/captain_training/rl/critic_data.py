"""Request-state datasets for the critic: (x(s_t), t, task, host success) rows.

File format (JSONL, one request state per line)::

    {"episode_id": "r12/e3", "task": "libero_goal/4", "request_index": 7,
     "features": [36 floats, ordered as rl.features.FEATURE_NAMES], "host_success": 1}

``group`` (the start state, for within-group AUC) is optional. ``request_index`` is
1-based: the snapshot taken before request t has index t.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from captain_training.rl.errors import CriticError
from captain_training.rl.features import N_FEATURES

_REQUIRED_KEYS = ("episode_id", "task", "request_index", "features", "host_success")


@dataclass
class CriticDataset:
    """Columns of request states. All arrays have the same length N.

    Attributes:
        features: (N, 36) float32, x(s_t).
        request_index: (N,) int64, the 1-based request index t.
        task: (N,) task ids (strings such as ``"libero_10/3"``).
        host_success: (N,) float32 0/1, host success of the state's episode.
        episode_id: (N,) episode keys (rows of one episode share it).
        group: (N,) start-state keys, or None.
    """

    features: np.ndarray
    request_index: np.ndarray
    task: np.ndarray
    host_success: np.ndarray
    episode_id: np.ndarray
    group: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.features = np.asarray(self.features, dtype=np.float32).reshape(-1, N_FEATURES) \
            if np.asarray(self.features).size else np.zeros((0, N_FEATURES), dtype=np.float32)
        self.request_index = np.asarray(self.request_index, dtype=np.int64).ravel()
        self.task = np.asarray(self.task, dtype=object).ravel()
        self.host_success = np.asarray(self.host_success, dtype=np.float32).ravel()
        self.episode_id = np.asarray(self.episode_id, dtype=object).ravel()
        if self.group is not None:
            self.group = np.asarray(self.group, dtype=object).ravel()
        n = self.features.shape[0]
        columns = {"request_index": self.request_index, "task": self.task,
                   "host_success": self.host_success, "episode_id": self.episode_id}
        if self.group is not None:
            columns["group"] = self.group
        for name, col in columns.items():
            if col.shape[0] != n:
                raise CriticError(f"critic dataset column {name!r} has {col.shape[0]} rows, "
                                  f"features have {n}")
        if n and not np.all((self.host_success == 0) | (self.host_success == 1)):
            raise CriticError("host_success must be 0 or 1")
        if n and self.request_index.min() < 1:
            raise CriticError("request_index is 1-based; found a value below 1")

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def subset(self, mask_or_index: np.ndarray) -> CriticDataset:
        """Rows selected by a boolean mask or an index array."""
        return CriticDataset(
            self.features[mask_or_index], self.request_index[mask_or_index], self.task[mask_or_index],
            self.host_success[mask_or_index], self.episode_id[mask_or_index],
            None if self.group is None else self.group[mask_or_index],
        )

    @staticmethod
    def concatenate(parts: Sequence[CriticDataset]) -> CriticDataset:
        """Rows of several datasets, in order."""
        if not parts:
            return CriticDataset(np.zeros((0, N_FEATURES)), [], [], [], [])
        groups = None
        if all(p.group is not None for p in parts):
            groups = np.concatenate([p.group for p in parts])
        return CriticDataset(
            np.concatenate([p.features for p in parts]), np.concatenate([p.request_index for p in parts]),
            np.concatenate([p.task for p in parts]), np.concatenate([p.host_success for p in parts]),
            np.concatenate([p.episode_id for p in parts]), groups,
        )


def episode_rows(episode_id: str, task: str, features: np.ndarray, host_success: bool,
                 group: str | None = None) -> CriticDataset:
    """Rows of one episode: ``features`` holds x(s_1)..x(s_T), giving request indices 1..T."""
    x = np.asarray(features, dtype=np.float32).reshape(-1, N_FEATURES)
    T = x.shape[0]
    return CriticDataset(x, np.arange(1, T + 1), [task] * T, [float(bool(host_success))] * T,
                         [episode_id] * T, None if group is None else [group] * T)


def split_by_episode(data: CriticDataset, heldout_fraction: float, seed: int = 0
                     ) -> tuple[CriticDataset, CriticDataset]:
    """(train, held-out) with whole episodes on one side; seeded and deterministic."""
    if not 0.0 < heldout_fraction < 1.0:
        raise CriticError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    episodes = np.array(sorted(set(data.episode_id.tolist()), key=str), dtype=object)
    rng = np.random.default_rng(seed)
    rng.shuffle(episodes)
    n_held = max(1, round(heldout_fraction * len(episodes)))
    held = set(episodes[:n_held].tolist())
    mask = np.array([e in held for e in data.episode_id.tolist()], dtype=bool)
    return data.subset(~mask), data.subset(mask)


def read_jsonl(path: str | Path) -> CriticDataset:
    """Load a request-state JSONL file (see the module docstring)."""
    path = Path(path)
    rows: list[dict] = []
    with path.open() as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CriticError(f"{path}:{line_no}: not JSON ({exc})") from None
            missing = [k for k in _REQUIRED_KEYS if k not in row]
            if missing:
                raise CriticError(f"{path}:{line_no}: missing keys {missing}; "
                                  f"each row needs {list(_REQUIRED_KEYS)}")
            if len(row["features"]) != N_FEATURES:
                raise CriticError(f"{path}:{line_no}: 'features' has {len(row['features'])} values, "
                                  f"expected {N_FEATURES}")
            rows.append(row)
    has_group = bool(rows) and all("group" in r for r in rows)
    return CriticDataset(
        features=np.array([r["features"] for r in rows], dtype=np.float32),
        request_index=[int(r["request_index"]) for r in rows],
        task=[str(r["task"]) for r in rows],
        host_success=[float(bool(r["host_success"])) for r in rows],
        episode_id=[str(r["episode_id"]) for r in rows],
        group=[str(r["group"]) for r in rows] if has_group else None,
    )


def iter_rows(data: CriticDataset) -> Iterable[dict]:
    """The JSONL rows of a dataset."""
    for i in range(len(data)):
        row = {"episode_id": str(data.episode_id[i]), "task": str(data.task[i]),
               "request_index": int(data.request_index[i]),
               "features": [float(v) for v in data.features[i]],
               "host_success": int(data.host_success[i])}
        if data.group is not None:
            row["group"] = str(data.group[i])
        yield row


def write_jsonl(data: CriticDataset, path: str | Path) -> None:
    """Write a dataset as JSONL (see the module docstring)."""
    with Path(path).open("w") as fh:
        for row in iter_rows(data):
            fh.write(json.dumps(row) + "\n")
