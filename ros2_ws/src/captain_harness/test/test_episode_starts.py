"""Batch start options of ``captain rollout`` / ``captain eval run``: driver options,
layouts (official, wide, LIBERO-PRO swap and shift) and seeds, against the installed
LIBERO catalogue and driver configs (no environment is built)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from captain_harness.core.episode.cli import app
from captain_harness.core.episode.errors import EpisodeError
from captain_harness.core.episode.starts import parse_driver_options, plan_starts


def test_driver_options_are_json_values_and_reach_the_plan() -> None:
    options = parse_driver_options(["settle_s=0.2", "antialiasing=true", "camera_width_px=64"])
    assert options == {"settle_s": 0.2, "antialiasing": True, "camera_width_px": 64}
    plan = plan_starts("libero_goal", "0-1", "11-12", driver_options=options)
    assert plan.tasks == ["libero_goal/0", "libero_goal/1"] and plan.states == [11, 12]
    assert plan.driver_options == options and plan.seeds is None and plan.episodes == 4


def test_unknown_or_bad_driver_option_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(EpisodeError, match=r"no option 'bogus'.*valid options: task, init_state.*settle_s"):
        plan_starts("libero_goal", "0", "11", driver_options={"bogus": 1})
    with pytest.raises(EpisodeError, match=r"settle_s.*maximum 5"):
        plan_starts("libero_goal", "0", "11", driver_options={"settle_s": 9})
    with pytest.raises(EpisodeError, match=r"cannot set seed .*--seeds"):
        plan_starts("libero_goal", "0", "11", driver_options={"seed": 3})
    with pytest.raises(EpisodeError, match="key=value"):
        parse_driver_options(["settle_s"])


def test_wide_layout_needs_seeds_and_sets_the_randomisation_flags() -> None:
    with pytest.raises(EpisodeError, match="--seeds"):
        plan_starts("libero_spatial", "0", "11", layout="wide")
    plan = plan_starts("libero_spatial", "0-2", "11", layout="wide", seeds="3-6",
                       driver_options={"randomize_materials": False})
    assert plan.seeds == [3, 4, 5, 6] and plan.states == [-1] and plan.episodes == 12
    assert plan.driver_options["random_layout"] is True and plan.driver_options["randomize_lighting"] is True
    assert plan.driver_options["randomize_materials"] is False  # the user's option wins


def test_pro_layouts_name_the_variant_suites_the_package_ships() -> None:
    swap = plan_starts("libero_goal", "0-3", "11", layout="pro_swap")
    assert swap.tasks == [f"libero_goal_swap/{i}" for i in range(4)]
    shift = plan_starts("libero_object", "0", "11", layout="pro_shift")
    assert [t.split("/")[0] for t in shift.tasks] == [f"libero_object_temp_{a}0.{k}" for a in "xy"
                                                      for k in range(1, 6)]
    one = plan_starts("libero_object", "2", "11", layout="pro_shift:x0.3")
    assert one.tasks == ["libero_object_temp_x0.3/2"]
    with pytest.raises(EpisodeError, match=r"no shift variant libero_goal_temp_.*libero_object_temp_x0.1"):
        plan_starts("libero_goal", "0", "11", layout="pro_shift")
    with pytest.raises(EpisodeError, match="unknown layout 'sideways'"):
        plan_starts("libero_goal", "0", "11", layout="sideways")


def test_rollout_cli_refuses_bad_options_before_any_episode(tmp_path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["rollout", "--suite", "libero_goal", "--tasks", "0", "--policy", "teacher",
                                 "--out", str(tmp_path), "--driver-option", "layout_spread=0.1"])
    assert result.exit_code == 2
    assert "layout_spread_m" in result.output  # the valid names are listed
    assert not any(tmp_path.iterdir())
