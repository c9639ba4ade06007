"""The wide-layout backend draws its layout from the request's seed: a request without
one is refused (it would replay the driver's default layout in every episode)."""

from __future__ import annotations

from pathlib import Path

import pytest

from captain_harness.core.episode.backend import BackendRequest
from captain_harness.core.episode.errors import EpisodeError
from captain_training.rl.backends import wide_layout_backend


def test_wide_layout_backend_refuses_a_request_without_a_seed(tmp_path: Path) -> None:
    request = BackendRequest(task="libero_goal/0", init_state=-1, seed=None, workspace=tmp_path,
                             session_workspace="/ws", episode_id="e")
    with pytest.raises(EpisodeError, match="--seeds"):
        wide_layout_backend(request)
