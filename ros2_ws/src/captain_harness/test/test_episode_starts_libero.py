"""Randomized and LIBERO-PRO starts through the episode runner on the real LIBERO driver:
every seed is its own layout, each record states what the start perturbed, and driver
options reach the driver. Episodes are one short cell (replayed), not task attempts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from captain_harness.core.episode.policy.registry import PolicySpec
from captain_harness.core.episode.policy.replay import ReplayPolicy
from captain_harness.core.episode.runner import rollout, run_episode
from captain_harness.core.episode.starts import plan_starts

pytestmark = [pytest.mark.sim, pytest.mark.e2e, pytest.mark.slow]

CELL = ["s = robot.get_robot_state()\nprint(sorted(s['value'])[:3])"]
SMALL = {"camera_width_px": 96, "camera_height_px": 96}


def _rows_meta(outcome: dict) -> list[dict]:
    rows = (Path(outcome["record_dir"]) / "rows.jsonl").read_text().splitlines()
    return [json.loads(r)["meta"] for r in rows]


def test_seeded_wide_starts_each_get_their_own_recorded_layout(tmp_path: Path) -> None:
    plan = plan_starts("libero_goal", "0", "11", layout="wide", seeds="3-4", driver_options=SMALL)
    first = run_episode(plan.tasks[0], policy=ReplayPolicy.from_cells(CELL), out_dir=tmp_path / "rec",
                        seed=plan.seeds[0], driver_options=plan.driver_options)
    assert first.error is None, first.error
    summary = rollout(plan.tasks, plan.states, policy=PolicySpec("replay", {"record": first.record_dir}),
                      out_dir=tmp_path / "roll", seeds=plan.seeds, driver_options=plan.driver_options)
    outcomes = sorted(summary["outcomes"], key=lambda o: o["seed"])
    assert [o["seed"] for o in outcomes] == [3, 4] and summary["infrastructure_failures"] == 0
    assert summary["start_redraws"] == sum(o["perturbation"]["layout_redraws"] for o in outcomes)
    records = [o["perturbation"] for o in outcomes]
    assert [r["seed"] for r in records] == [3, 4] and all(r["layout"] == "wide" for r in records)
    assert records[0] == first.perturbation  # the same seed is the same start
    assert records[0]["moved_objects"] != records[1]["moved_objects"]  # not one layout replayed
    for outcome, record in zip(outcomes, records, strict=True):
        assert record["moved_objects"] and record["appearance"]["light_scale"]
        on_disk = json.loads((Path(outcome["record_dir"]) / "outcome.json").read_text())
        assert on_disk["perturbation"] == record
        for meta in _rows_meta(outcome):
            assert meta["perturb_axes"] == ["object_layout", "lighting", "camera_view", "object_attributes"]


def test_pro_swap_start_states_its_variant_and_driver_options_reach_the_driver(tmp_path: Path) -> None:
    plan = plan_starts("libero_goal", "0", "11", layout="pro_swap", driver_options={**SMALL, "settle_s": 0.2})
    outcome = run_episode(plan.tasks[0], policy=ReplayPolicy.from_cells(CELL), out_dir=tmp_path,
                          init_state=plan.states[0], driver_options=plan.driver_options)
    assert outcome.error is None, outcome.error
    assert outcome.task == "libero_goal_swap/0"
    record = outcome.perturbation
    assert record["variant"] == "swap" and record["base_suite"] == "libero_goal" and record["init_state"] == 11
    assert {m["to_region"] for m in record["region_moves"].values()} >= {"main_table_cabinet_region"}
    assert all(meta["perturb_axes"] == ["object_position_swap"] for meta in _rows_meta(outcome.to_dict()))
    from PIL import Image

    frames = [p for p in sorted(tmp_path.glob("images/**/*")) if p.is_file()]
    assert frames  # the initial frames, rendered at the size the driver options set
    assert {Image.open(p).size for p in frames} == {(96, 96)}
