"""`captain eval compare|run` and the PNG plots."""

from __future__ import annotations

import json

import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from captain_training.eval.cli import app
from captain_training.eval.errors import EvalError
from captain_training.eval.plots import plot_calibration, plot_suite_success
from captain_training.rl.critic_metrics import reliability_bins

PNG = b"\x89PNG\r\n\x1a\n"


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rows(outcomes):
    return [{"suite": "libero_goal", "task_id": f"libero_goal/{i % 4}", "init_state": 11 + i // 4,
             "host_success": h, "strict_success": s} for i, (h, s) in enumerate(outcomes)]


def test_compare_prints_table_and_json(tmp_path):
    a = _rows([(True, True), (False, False), (False, False), (True, False)] * 3)
    b = _rows([(True, True), (True, True), (False, False), (True, True)] * 3)
    _write(tmp_path / "a.jsonl", a)
    _write(tmp_path / "b.jsonl", b)
    plot = tmp_path / "suite.png"
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"),
                                   "--n-boot", "500", "--label-a", "sft", "--label-b", "rl", "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    host, strict = out["comparisons"]
    assert host["metric"] == "host_success" and strict["metric"] == "strict_success"
    assert (host["only_a"], host["only_b"]) == (0, 3)
    assert host["p_value"] == pytest.approx(0.25)  # 2 * (1/2)^3
    assert (strict["only_a"], strict["only_b"]) == (0, 6)
    assert strict["p_value"] == pytest.approx(binomtest(0, 6, 0.5).pvalue)
    assert "rl vs sft" in res.output
    assert plot.read_bytes()[:8] == PNG


def test_compare_reports_unpaired_files(tmp_path):
    _write(tmp_path / "a.jsonl", _rows([(True, True)] * 4))
    _write(tmp_path / "b.jsonl", _rows([(True, True)] * 3))
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])
    assert res.exit_code == 1
    assert "only in A" in res.output
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"),
                                   "--allow-unpaired", "--metric", "host_success", "--n-boot", "100"])
    assert res.exit_code == 0, res.output


@pytest.mark.sim
def test_run_writes_results_that_compare_pairs(tmp_path):
    from captain_harness.core.episode.policy.scripted_server import ScriptedChatServer, completion

    with ScriptedChatServer(lambda body, n: completion("print(robot.get_robot_state()['success'])")
                            if len([m for m in body["messages"] if m["role"] == "assistant"]) == 0
                            else completion(None, content="done")) as server:
        out = tmp_path / "a.jsonl"
        res = CliRunner().invoke(app, ["run", "--suite", "tabletop", "--tasks", "pick_cube", "--states", "0-1",
                                       "--base-url", server.base_url, "--model", "scripted", "--out", str(out),
                                       "--records", str(tmp_path / "rec"), "--max-requests", "4"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.strip().splitlines()[-1])
    assert summary["result_lines"] == 2 and summary["infrastructure_failures"] == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["suite"], r["task_id"], r["init_state"]) for r in rows] == [
        ("tabletop", "tabletop/pick_cube", 0), ("tabletop", "tabletop/pick_cube", 1)]
    assert all(r["requests"] == 2 and r["end_reason"] == "no_tool_call" and not r["host_success"] for r in rows)
    res = CliRunner().invoke(app, ["compare", str(out), str(out), "--n-boot", "50"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1])["comparisons"][0]["n_pairs"] == 2


def test_plots_write_png(tmp_path):
    path = plot_suite_success({"libero_spatial": {"SFT": 0.6, "RL": 0.8}, "libero_goal": {"SFT": 0.5, "RL": 0.7}},
                              tmp_path / "bars.png")
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 5000
    bins = reliability_bins([0, 0, 1, 1, 1, 0], [0.1, 0.3, 0.6, 0.9, 0.8, 0.4], n_bins=5)
    cal = plot_calibration(bins, tmp_path / "sub" / "calibration.png")
    assert cal.read_bytes()[:8] == PNG
    with pytest.raises(EvalError, match="expected"):
        plot_suite_success({"a": {"SFT": 0.1}, "b": {"RL": 0.2}}, tmp_path / "x.png")
    with pytest.raises(EvalError, match="empty"):
        plot_calibration(reliability_bins([], [], 3), tmp_path / "y.png")
