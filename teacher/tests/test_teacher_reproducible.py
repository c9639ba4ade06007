"""The same teacher episode run twice in process is the same episode, call for call:
tabletop/cube_on_plate, official initial state 0, teacher ``seed=0``, run twice in one
process, gives the same receipts (all of them, in order), the same calls with the same
results, the same cell outputs, byte-identical camera images, the same teacher style and
the same outcome. Only wall-clock fields (``WALL_CLOCK``) and the sandbox uid differ.

Without a ``seed`` the teacher draws each episode's style (speeds, hover heights, whether
it previews with ``check_motion``, ...) from a freshly drawn seed by design (``captain_teacher
.policy``), so two unseeded runs legitimately differ from the first motion on; that seed is
in ``teacher.json`` (``episode_seed``) and ``seed=<it>`` makes the same draws again. The
simulator, the harness and perception add no randomness of their own.

Two episodes of 8-9 requests each (about 10-15 s each here).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from captain_harness.core.episode.runner import run_episode
from captain_teacher import TeacherPolicy

os.environ.setdefault("MUJOCO_GL", "egl")

TASK = "tabletop/cube_on_plate"
#: outcome fields that are wall-clock measurements or name the run (episode id, folder).
WALL_CLOCK = {"episode_id", "record_dir", "wall_time_s", "policy_s_total", "robot_s_total",
              "harness_s_per_request", "harness_s_per_request_median"}
#: the sandbox's protections name the uid the session ran as, one per session of the process.
SANDBOX_UID = "uid"
#: fields of a call record that are wall-clock measurements.
CALL_TIMING = {"duration_s"}
#: "Cell 3 completed in 5.5 s": the cell's wall time at the head of its output.
CELL_TIME = re.compile(r"^(Cell \d+ \w+) in [0-9.]+ s")


def _episode(tmp_path: Path) -> dict[str, Any]:
    outcome = run_episode(TASK, policy=TeacherPolicy(seed=0), out_dir=tmp_path, init_state=0)
    assert outcome.error is None, outcome.error
    record = Path(outcome.record_dir)
    events = [json.loads(line) for line in (record / "events.jsonl").read_text().splitlines()]
    cells = [c for e in events for c in e["cells"]]
    images = sorted((tmp_path / "images").rglob("*.png"))
    return {
        "outcome": {k: ({p: x for p, x in v.items() if p != SANDBOX_UID} if k == "protections" else v)
                    for k, v in outcome.to_dict().items() if k not in WALL_CLOCK},
        "receipts": [r for c in cells for r in c.get("receipts") or []],
        "calls": [{k: v for k, v in call.items() if k not in CALL_TIMING} for c in cells for call in c["calls"]],
        "code": [c["code"] for c in cells],
        "outputs": [CELL_TIME.sub(r"\1", c["output"]) for c in cells],
        "errors": [c["error"] for c in cells],
        "images": [(p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in images],
        "teacher": json.loads((record / "teacher.json").read_text()),
    }


@pytest.mark.sim
def test_the_same_seeded_teacher_episode_twice_gives_identical_receipts(tmp_path: Path) -> None:
    first, second = _episode(tmp_path / "a"), _episode(tmp_path / "b")
    assert first["outcome"]["outcome"] == "strict_success", first["outcome"]
    assert any(r.startswith("move_to: ok") for r in first["receipts"])  # the episode moved the arm
    assert len(first["images"]) >= 4
    assert first["teacher"]["episode_seed"] == 0
    for key in first:
        assert second[key] == first[key], (key, _differences(first[key], second[key]))


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON-like values differ (for the failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in (_differences(a.get(k), b.get(k), f"{path}.{k}") if k in a and k in b
                          else [f"{path}.{k}: only in one"])]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_an_unseeded_episode_draws_a_seed_that_reproduces_its_choices() -> None:
    episode = "tabletop_cube_on_plate_seed-0-1a2b3c"
    rng, seed = TeacherPolicy()._rng(episode)
    again, same = TeacherPolicy(seed=seed)._rng("tabletop_cube_on_plate_seed-0-9f8e7d")  # another run's suffix
    assert same == seed
    assert list(again.random(8)) == list(rng.random(8))
    other, _ = TeacherPolicy(seed=seed)._rng("tabletop_cube_on_plate_seed-1-1a2b3c")  # another start
    assert list(other.random(8)) != list(TeacherPolicy(seed=seed)._rng(episode)[0].random(8))
    assert len({TeacherPolicy()._rng(episode)[1] for _ in range(8)}) > 1  # unseeded runs differ
