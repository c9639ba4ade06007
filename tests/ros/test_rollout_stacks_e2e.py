"""`captain rollout --stacks` against two namespaced `captain bringup sim` stacks (the
native MuJoCo tabletop), one batch of three seeded teacher episodes: /robot2 is killed
(SIGKILL, every process of it) at the first feedback of its episode; no episode is lost
(that attempt is recorded as a failed one and the episode runs on /robot1), and every
episode over ROS is the same episode as the one run in process (task, initial state,
teacher seed): the same outcome, every receipt in order, the same calls with the same
results, cell code and outputs, byte-identical camera images and the same teacher style
(see ``_record`` for the fields left out and why)"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib.util
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e, pytest.mark.sim, pytest.mark.slow]

TASK = "tabletop/cube_on_plate"
#: the teacher's seed: its style (speeds, hover heights, check_motion or not, ...) is drawn
#: per episode from the seed and the episode id's task and start; without a seed it is drawn
#: fresh by design, and two runs of the same episode differ from the first motion on.
TEACHER = {"seed": 0}
#: outcome.json fields that legitimately differ between two runs of the same episode:
#: wall-clock measurements, the run's own name and folder, and (in ``protections``) the
#: uid of the sandbox session, one per session.
WALL_CLOCK = {"episode_id", "record_dir", "wall_time_s", "policy_s_total", "robot_s_total",
              "harness_s_per_request", "harness_s_per_request_median"}
#: "Cell 3 completed in 5.5 s": the cell's wall time at the head of its output.
CELL_TIME = re.compile(r"^(Cell \d+ \w+) in [0-9.]+ s")


def _teacher() -> str:
    from captain_harness.core.episode.policy.registry import available_policies

    if "teacher" in available_policies():
        return "teacher"
    if importlib.util.find_spec("captain_teacher.policy") is not None:
        return "captain_teacher.policy:make_teacher"
    pytest.skip("no teacher policy on this install")


def _record(record_dir: Path, images_root: Path) -> dict[str, Any]:
    """What must be identical between two runs of the same episode, over ROS or in process.

    Left out, because they are wall-clock measurements or name the run: per request its
    times (``t_s``, ``policy_s``, ``robot_s``, ``code_s``, ``harness_s``, ``usage``, the
    ``budget``'s wall time) and ``estimated_prompt_tokens`` (the prompt names the episode
    id, whose random suffix tokenizes to a count that varies by a few tokens); per cell
    ``tool_call_id`` (random), ``duration_s``/``code_s``, the image paths (they name the
    episode id; the images themselves are compared by content) and the wall time at the
    head of its output; per call ``duration_s``; in the outcome ``WALL_CLOCK`` and the
    sandbox uid.
    """
    events = [json.loads(line) for line in (record_dir / "events.jsonl").read_text().splitlines()]
    cells = [c for e in events for c in e["cells"]]
    outcome = json.loads((record_dir / "outcome.json").read_text())
    outcome = {k: ({p: x for p, x in v.items() if p != "uid"} if k == "protections" else v)
               for k, v in outcome.items() if k not in WALL_CLOCK}
    images = sorted((images_root / "images" / "episodes" / record_dir.name).glob("*.png"))
    return {
        "receipts": [r for c in cells for r in c.get("receipts") or []],
        "outcome": outcome,
        "requests": [{k: e[k] for k in ("request_index", "finish_reason", "reasoning", "content", "finished",
                                        "request_record", "compacted_requests")} for e in events],
        "calls": [{k: v for k, v in call.items() if k != "duration_s"} for c in cells for call in c["calls"]],
        "cells": [{"code": c["code"], "output": CELL_TIME.sub(r"\1", c["output"]), "error": c["error"],
                   "timed_out": c["timed_out"], "images": [Path(i).name for i in c["images"]]} for c in cells],
        "images": [(p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in images],
        "teacher": json.loads((record_dir / "teacher.json").read_text()),
    }


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON-like values differ (in process, over ROS), for the failure message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in (_differences(a.get(k), b.get(k), f"{path}.{k}") if k in a and k in b
                          else [f"{path}.{k}: only in one"])]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _start_stacks(tmp_path: Path) -> dict[str, Stack]:
    stacks: dict[str, Stack] = {}
    errors: list[BaseException] = []

    def start(name: str) -> None:
        try:
            stacks[f"/{name}"] = Stack("sim", "--namespace", name, "--param",
                                       f"episode_runner.records_dir={tmp_path / name}",
                                       "--param", "harness.camera_rate_hz=0.0", ready_timeout_s=180.0)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(n,)) for n in ("robot1", "robot2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        for stack in stacks.values():
            stack.stop()
        raise errors[0]
    return stacks


def _kill(stack: Stack) -> None:
    """SIGKILL the bringup (first: it would respawn the episode runner), then the process
    group of each of its children."""
    stack.proc.kill()
    pids = [int(p) for p in re.findall(r"started \w+(?: again)? \(pid (\d+)\)", "\n".join(stack.lines))]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def test_rollout_on_two_stacks_matches_in_process_and_survives_a_killed_stack(tmp_path: Path) -> None:
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import rollout
    from captain_harness.nodes.stack_client import StackTimeouts, rollout_on_stacks

    spec = PolicySpec(_teacher(), dict(TEACHER))
    killed: list[str] = []
    with isolated_domain():
        stacks = _start_stacks(tmp_path)

        def on_feedback(stack: str, _feedback: Any) -> None:  # /robot2 dies during its first episode
            if stack == "/robot2" and not killed:
                killed.append(stack)
                _kill(stacks["/robot2"])

        try:
            summary = rollout_on_stacks([TASK], [0, 1, 2], stacks=["/robot1", "/robot2"], policy=spec,
                                        out_dir=tmp_path / "ros", on_feedback=on_feedback,
                                        timeouts=StackTimeouts(heartbeat_timeout_s=15.0))
        finally:
            codes = {name: stack.stop(timeout_s=60.0) for name, stack in stacks.items()}
    local = rollout([TASK], [0, 1, 2], policy=spec, out_dir=tmp_path / "local")

    assert killed == ["/robot2"], "/robot2 never ran an episode"
    assert summary["episodes"] == 3 and summary["infrastructure_failures"] == 0, summary["outcomes"]
    assert summary["stack_failures"] == 1
    moved = [o for o in summary["outcomes"] if o["stack_attempts"]]
    assert len(moved) == 1 and moved[0]["stack"] == "/robot1"
    assert moved[0]["stack_attempts"][0]["stack"] == "/robot2"
    assert "no diagnostics" in moved[0]["stack_attempts"][0]["error"]

    over_ros = {o["init_state"]: o for o in summary["outcomes"]}
    in_process = {o["init_state"]: o for o in local["outcomes"]}
    assert sorted(over_ros) == sorted(in_process) == [0, 1, 2]
    receipt_diffs: dict[int, str] = {}
    record_diffs: dict[int, list[str]] = {}
    for state, ros_outcome in over_ros.items():
        mine = in_process[state]
        assert mine["outcome"] != "infrastructure_failure", mine.get("error")
        summary_keys = ("outcome", "host_success", "strict_success", "requests", "physical_actions")
        if {k: ros_outcome[k] for k in summary_keys} != {k: mine[k] for k in summary_keys}:
            record_diffs[state] = [f"summary: {[(k, mine[k], ros_outcome[k]) for k in summary_keys]}"]
        record = Path(ros_outcome["record_dir"])
        assert record.parent == tmp_path / "ros" / "episodes", "the record is copied into out_dir"
        assert Path(ros_outcome["stack_record_dir"]).parent.parent == tmp_path / "robot1"
        assert len((record / "rows.jsonl").read_text().splitlines()) == ros_outcome["requests"]
        stack_root = Path(ros_outcome["stack_record_dir"]).parent.parent
        ours = _record(record, stack_root)
        theirs = _record(Path(mine["record_dir"]), tmp_path / "local")
        assert ours["images"], "the stack's camera images are in its records folder"
        if ours["receipts"] != theirs["receipts"]:
            receipt_diffs[state] = "\n".join(difflib.unified_diff(theirs["receipts"], ours["receipts"],
                                                                 "in process", "over ROS", lineterm=""))
        differing = [key for key in ours if key != "receipts" and ours[key] != theirs[key]]
        if differing:
            record_diffs.setdefault(state, []).extend(
                f"{key}: {_differences(theirs[key], ours[key])[:5]}" for key in differing)
    assert receipt_diffs == {}, "\n".join(f"state {s}:\n{d}" for s, d in receipt_diffs.items())
    assert record_diffs == {}, record_diffs
    assert sum(o["strict_success"] for o in over_ros.values()) >= 2, "the teacher fails the cube task too often"
    assert codes["/robot1"] == 0, "\n".join(stacks["/robot1"].lines[-30:])


def test_batches_share_an_open_fleet_and_leave_it_open(tmp_path: Path) -> None:
    """``rollout_on_stacks(..., fleet=...)``: two batches through one client, which the
    batches neither close nor replace (``captain bench ros`` runs its rounds this way); a
    fleet of other stacks is refused before any episode is sent."""
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.nodes.stack_client import StackFleet, rollout_on_stacks

    spec = PolicySpec(_teacher(), dict(TEACHER))
    with isolated_domain():
        stack = Stack("sim", "--namespace", "robot1", "--param", f"episode_runner.records_dir={tmp_path / 'robot1'}",
                      "--param", "harness.camera_rate_hz=0.0", ready_timeout_s=180.0)
        fleet = StackFleet(["/robot1"])
        try:
            with pytest.raises(ValueError, match="not the batch's"):
                rollout_on_stacks([TASK], [0], stacks=["/robot2"], policy=spec, out_dir=tmp_path / "x", fleet=fleet)
            first = rollout_on_stacks([TASK], [0], stacks=["/robot1"], policy=spec, out_dir=tmp_path / "a",
                                      fleet=fleet)
            assert not fleet._closed.is_set(), "the batch closed a fleet it was lent"
            second = rollout_on_stacks([TASK], [1], stacks=["/robot1"], policy=spec, out_dir=tmp_path / "b",
                                       fleet=fleet)
        finally:
            fleet.close()
            code = stack.stop(timeout_s=60.0)
    for summary in (first, second):
        assert summary["episodes"] == 1 and summary["infrastructure_failures"] == 0, summary["outcomes"]
        assert summary["stack_failures"] == 0
    assert [o["init_state"] for o in first["outcomes"] + second["outcomes"]] == [0, 1]
    assert code == 0, "\n".join(stack.lines[-30:])
