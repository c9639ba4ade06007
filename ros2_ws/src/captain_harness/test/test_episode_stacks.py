"""The stack scheduler of ``--stacks`` (ROS-free): namespaces, one episode per stack at a
time, retries on another stack, and no episode dropped when stacks die. The ROS side runs
against real bringups in tests/ros/test_rollout_stacks_e2e.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import typer

from captain_harness.core.episode.stacks import StackUnavailable, parse_stacks, run_on_stacks


def _jobs(n: int) -> list[dict[str, Any]]:
    return [{"task": "tabletop/cube_on_plate", "init_state": i} for i in range(n)]


def _ok(stack: str, job: dict[str, Any]) -> dict[str, Any]:
    return {"task": job["task"], "init_state": job["init_state"], "outcome": "strict_success", "ran_on": stack}


def test_parse_stacks_from_text_and_file(tmp_path: Path) -> None:
    assert parse_stacks("/robot1, robot2/,/a/b") == ["/robot1", "/robot2", "/a/b"]
    listing = tmp_path / "stacks.txt"
    listing.write_text("# sim stacks\n/robot1\n\nrobot2  # the second\n")
    assert parse_stacks(str(listing)) == ["/robot1", "/robot2"]
    with pytest.raises(ValueError, match="twice"):
        parse_stacks("/robot1,/robot1")
    with pytest.raises(ValueError, match="not a ROS namespace"):
        parse_stacks("/robot-1")
    with pytest.raises(ValueError, match="no stack namespaces"):
        parse_stacks(" , ")


def test_one_episode_per_stack_at_a_time_and_job_order() -> None:
    busy: dict[str, int] = {"/a": 0, "/b": 0}
    most = {"/a": 0, "/b": 0}
    lock = threading.Lock()

    def run_one(stack: str, job: dict[str, Any]) -> dict[str, Any]:
        with lock:
            busy[stack] += 1
            most[stack] = max(most[stack], busy[stack])
        time.sleep(0.01 * (job["init_state"] % 3))
        with lock:
            busy[stack] -= 1
        return _ok(stack, job)

    done: list[str | None] = []
    outcomes = run_on_stacks(_jobs(9), ["/a", "/b"], run_one, progress=lambda s, o: done.append(s))
    assert [o["init_state"] for o in outcomes] == list(range(9))
    assert most == {"/a": 1, "/b": 1}
    assert all(o["stack"] == o["ran_on"] and o["stack_attempts"] == [] for o in outcomes)
    assert sorted(done) == sorted(o["stack"] for o in outcomes) and len(done) == 9


def test_a_dead_stack_retires_and_its_episode_runs_on_another() -> None:
    b_took_one = threading.Event()

    def run_one(stack: str, job: dict[str, Any]) -> dict[str, Any]:
        if stack == "/b":
            b_took_one.set()
            raise StackUnavailable(f"{stack}: no diagnostics for 30 s", retire=True)
        assert b_took_one.wait(5.0)  # /b takes an episode before /a ends its first
        return _ok(stack, job)

    failed: list[tuple[str, int]] = []
    outcomes = run_on_stacks(_jobs(4), ["/a", "/b"], run_one,
                             on_attempt_failed=lambda s, j, e: failed.append((s, j["init_state"])))
    assert [o["outcome"] for o in outcomes] == ["strict_success"] * 4
    assert {o["stack"] for o in outcomes} == {"/a"}
    assert len(failed) == 1 and failed[0][0] == "/b"
    retried = outcomes[failed[0][1]]
    assert [a["stack"] for a in retried["stack_attempts"]] == ["/b"]
    assert "no diagnostics" in retried["stack_attempts"][0]["error"]
    assert "outcome" not in retried["stack_attempts"][0]


def test_every_stack_dead_ends_each_episode_as_infrastructure_failure() -> None:
    calls: list[str] = []

    def run_one(stack: str, job: dict[str, Any]) -> dict[str, Any]:
        calls.append(stack)
        raise StackUnavailable(f"{stack}: gone", retire=True)

    outcomes = run_on_stacks(_jobs(3), ["/a", "/b"], run_one)
    assert len(outcomes) == 3 and sorted(calls) == ["/a", "/b"]
    assert all(o["outcome"] == "infrastructure_failure" and o["stack"] is None for o in outcomes)
    assert [o["init_state"] for o in outcomes] == [0, 1, 2]
    tried = [o for o in outcomes if o["stack_attempts"]]
    assert tried and "gone" in tried[0]["error"]


def test_an_answered_infrastructure_failure_is_tried_once_per_stack() -> None:
    answered = {"task": "tabletop/cube_on_plate", "init_state": 0, "outcome": "infrastructure_failure",
                "error": "harness not reachable"}
    calls: list[str] = []

    def run_one(stack: str, job: dict[str, Any]) -> dict[str, Any]:
        calls.append(stack)
        if job["init_state"] == 0:
            raise StackUnavailable(f"{stack}: infrastructure failure", retire=False, outcome=dict(answered))
        return _ok(stack, job)

    outcomes = run_on_stacks(_jobs(3), ["/a", "/b"], run_one)
    first = outcomes[0]
    assert first["outcome"] == "infrastructure_failure" and first["error"] == "harness not reachable"
    assert sorted(a["stack"] for a in first["stack_attempts"]) == ["/a", "/b"]
    assert [o["outcome"] for o in outcomes[1:]] == ["strict_success"] * 2
    assert calls.count("/a") + calls.count("/b") == 4


def test_rollout_refuses_options_a_stack_sets_itself() -> None:
    from captain_harness.core.episode.cli import stack_options

    assert stack_options("/robot1,/robot2") == ["/robot1", "/robot2"]
    for kwargs, option in (({"workers": 2}, "--workers"), ({"backend": "m:f"}, "--backend"),
                           ({"isolation": "none"}, "--isolation"), ({"system_prompt": Path("p.txt")},
                                                                    "--system-prompt")):
        with pytest.raises(typer.BadParameter, match=option):
            stack_options("/robot1", **kwargs)
    with pytest.raises(typer.BadParameter, match="not a ROS namespace"):
        stack_options("/robot 1")


def test_records_are_copied_into_out_and_a_failed_copy_keeps_the_stack_record(tmp_path: Path) -> None:
    from captain_harness.nodes.stack_client import copy_record

    source = tmp_path / "stack" / "episodes" / "tabletop_cube_on_plate_seed-0-abc123"
    source.mkdir(parents=True)
    (source / "rows.jsonl").write_text('{"messages": []}\n')
    copied = copy_record({"record_dir": str(source), "outcome": "strict_success"}, tmp_path / "out")
    assert copied["record_dir"] == str(tmp_path / "out" / "episodes" / source.name)
    assert (Path(copied["record_dir"]) / "rows.jsonl").read_text() == '{"messages": []}\n'
    assert copied["stack_record_dir"] == str(source)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    kept = copy_record({"record_dir": str(source)}, blocker)
    assert kept["record_dir"] == str(source) and "record_copy_error" in kept
    assert copy_record({"record_dir": str(tmp_path / "elsewhere")}, tmp_path / "out") == {
        "record_dir": str(tmp_path / "elsewhere")}
