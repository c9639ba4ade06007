"""captain sft validate|prepare|train and captain datagen through their typer commands."""

from __future__ import annotations

import json

import typer
from sft_rows import PYTHON_TOOL, agent_turn, user, write_rows
from typer.testing import CliRunner

from captain_training.datagen.cli import datagen
from captain_training.sft.cli import app

RUNNER = CliRunner()


def row(k: int) -> dict:
    return {"id": f"ep#req-{k:03d}", "images": [], "tools": [PYTHON_TOOL],
            "messages": [{"role": "system", "content": "sys"}, user(f"Task {k}."), agent_turn("plan", f"x = {k}")],
            "meta": {"source": "agent", "turn_index": 0}}


def test_validate_command(tmp_path):
    good = write_rows(tmp_path / "good.jsonl", [row(0), row(1)])
    result = RUNNER.invoke(app, ["validate", str(good)])
    assert result.exit_code == 0, result.output
    assert "2 rows, 0 with problems" in result.output

    broken = row(2)
    broken["meta"]["turn_index"] = 5
    bad = write_rows(tmp_path / "bad.jsonl", [row(0), "{", broken])
    result = RUNNER.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 1
    assert "line 2: not valid JSON" in result.output
    assert "line 3: meta.turn_index 5 must be the ordinal of the last assistant turn, 0" in result.output
    result = RUNNER.invoke(app, ["validate", str(bad), "--json"])
    report = json.loads(result.output)
    assert report["n_bad_rows"] == 2 and [p["line"] for p in report["problems"]] == [2, 3]


def test_prepare_and_train_commands(tmp_path, tiny_model_dir):
    data = write_rows(tmp_path / "rows.jsonl", [row(k) for k in range(5)])
    result = RUNNER.invoke(app, ["prepare", str(data), "--model", str(tiny_model_dir), "--out",
                                 str(tmp_path / "prep"), "--world", "2"])
    assert result.exit_code == 0, result.output
    assert "prepared 4 of 5 rows for 2 rank(s)" in result.output
    assert "1 rows of an incomplete last step" in result.output
    manifest = json.loads((tmp_path / "prep" / "manifest.json").read_text())
    assert manifest["rows_per_rank"] == 2 and manifest["n_dropped_incomplete_step"] == 1

    result = RUNNER.invoke(app, ["prepare", str(data), "--model", str(tiny_model_dir), "--out",
                                 str(tmp_path / "prep1"), "--max-length", "20"])
    assert result.exit_code == 1 and "more than --max-length 20" in result.output

    result = RUNNER.invoke(app, ["train", "--data", str(tmp_path / "prep1"), "--model", str(tiny_model_dir),
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and "not a prepared data directory" in result.output

    RUNNER.invoke(app, ["prepare", str(data), "--model", str(tiny_model_dir), "--out", str(tmp_path / "prep1")])
    result = RUNNER.invoke(app, ["train", "--data", str(tmp_path / "prep1"), "--model", str(tiny_model_dir),
                                 "--out", str(tmp_path / "run"), "--max-steps", "1", "--device", "cpu",
                                 "--precision", "fp32", "--no-export-final", "--lr", "1e-4"])
    assert result.exit_code == 0, result.output
    assert "done: 1/1 steps" in result.output
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[0]["step"] == 1 and metrics[0]["learning_rate"] == 1e-4 and metrics[0]["rows"] == 1


def test_datagen_command(tmp_path):
    app_ = typer.Typer()
    app_.command()(datagen)
    record = row(0)
    record["meta"] = {"episode": "ep", "suite": "libero_10", "request_index": 0, "host_final_success": True}
    write_rows((tmp_path / "eps").mkdir() or tmp_path / "eps" / "ep.jsonl", [record])
    result = RUNNER.invoke(app_, [str(tmp_path / "eps"), "--out", str(tmp_path / "rows.jsonl")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["rows"] == 1 and summary["episodes"] == 1
    result = RUNNER.invoke(app_, [str(tmp_path / "eps"), "--out", str(tmp_path / "r.jsonl"), "--mode", "zip"])
    assert result.exit_code == 1 and "mode 'zip' is not one of: per-request, packed" in result.output
