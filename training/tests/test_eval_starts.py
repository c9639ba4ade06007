"""`captain eval run` start options: --layout, --seeds and --driver-option are checked
before any episode, and randomized starts are named by their seed in the result lines
so that `compare` pairs the same start of two policies."""

from __future__ import annotations

from typer.testing import CliRunner

from captain_training.eval.cli import app
from captain_training.eval.results import EpisodeResult
from captain_training.eval.runner import result_line


def _outcome(**kw):
    base = {"suite": "libero_goal", "task": "libero_goal/2", "init_state": -1, "seed": 5, "outcome": "success",
            "host_success": True, "strict_success": True, "perturbation": {"seed": 5, "layout": "wide"}}
    return {**base, **kw}


def test_randomized_starts_are_named_by_seed_and_keep_their_perturbation():
    line = result_line(_outcome())
    assert line["init_state"] == "seed-5" and line["perturbation"] == {"seed": 5, "layout": "wide"}
    assert EpisodeResult.from_dict(line).key == ("libero_goal", "libero_goal/2", "seed-5")
    official = result_line(_outcome(init_state=11, seed=None, perturbation={}))
    assert official["init_state"] == 11


def test_bad_start_options_are_refused_before_any_episode(tmp_path):
    runner = CliRunner()
    common = ["run", "--suite", "libero_goal", "--tasks", "0", "--policy", "teacher",
              "--out", str(tmp_path / "r.jsonl"), "--records", str(tmp_path / "rec")]
    bad_key = runner.invoke(app, [*common, "--driver-option", "spread=0.1"])
    assert bad_key.exit_code == 1 and "valid options:" in bad_key.output and "layout_spread_m" in bad_key.output
    no_seeds = runner.invoke(app, [*common, "--layout", "wide"])
    assert no_seeds.exit_code == 1 and "--seeds" in no_seeds.output
    no_variant = runner.invoke(app, [*common, "--layout", "pro_shift"])
    assert no_variant.exit_code == 1 and "libero_object_temp_x0.1" in no_variant.output
    malformed = runner.invoke(app, [*common, "--driver-option", "settle_s"])
    assert malformed.exit_code == 2 and "key=value" in malformed.output
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "rec").exists()
