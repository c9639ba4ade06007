"""`captain serve` + `captain eval run --base-url`: a served checkpoint runs real harness episodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from captain_training.models.serve import endpoint_config


def test_prompt_limit_follows_the_models_context(tiny_smollm2_dir: Path) -> None:
    config = endpoint_config(tiny_smollm2_dir, max_new_tokens=512)
    assert config.max_prompt_tokens == 8192 - 512
    assert config.served_model_name == tiny_smollm2_dir.name


def _captain(*args: str) -> list[str]:
    return [sys.executable, "-m", "captain_bringup.cli.main", *args]


@pytest.mark.sim
@pytest.mark.e2e
def test_served_text_model_runs_an_eval_episode(tmp_path: Path, tiny_smollm2_dir: Path) -> None:
    """The real commands in their own processes: the server samples, the harness parses, the
    episode ends on the (random) model's reply without a tool call, and the result line says so."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(_captain("serve", str(tiny_smollm2_dir), "--port", "0", "--served-model-name", "tiny",
                                       "--max-new-tokens", "12", "--threads", "1"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline()
        assert line, server.stderr.read()
        info = json.loads(line)
        base_url = info["base_url"]
        with urllib.request.urlopen(base_url + "/models", timeout=10) as resp:
            assert json.load(resp)["data"][0]["id"] == "tiny"
        started = time.monotonic()
        out = tmp_path / "results.jsonl"
        done = subprocess.run(_captain("eval", "run", "--suite", "tabletop", "--tasks", "cube_on_plate", "--states",
                                       "100", "--base-url", base_url, "--model", "tiny", "--out", str(out),
                                       "--records", str(tmp_path / "records"), "--max-requests", "3"),
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        results = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(results) == 1 and results[0]["task_id"] == "tabletop/cube_on_plate"
        assert results[0]["init_state"] == 100 and results[0]["host_success"] is False
        assert results[0]["requests"] >= 1
        assert time.monotonic() - started < 240
        rows = list((tmp_path / "records").rglob("rows.jsonl"))
        assert rows, "the episode wrote no record"
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "served" in server.stderr.read()
