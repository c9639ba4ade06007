"""Fixtures shared by every test tier (rootdir conftest: applies to all test folders)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Remove the Fast DDS shared-memory files of processes that died without closing them
    (``fastdds shm clean``; files of running processes are kept). A killed node process
    leaves its segment (16 MB with the stack's profile) and its ports in /dev/shm; a later
    process with the same domain and participant id reopens such a port."""
    tool = shutil.which("fastdds")
    if tool is None:
        return
    try:
        subprocess.run([tool, "shm", "clean"], capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"fastdds shm clean: {exc}")


@pytest.fixture
def ros_domain(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """An isolated ROS_DOMAIN_ID for one test (coordinated across processes), with DDS
    discovery kept on localhost. Subprocesses started by the test inherit it."""
    from captain_perception.nodes.dds_profile import fresh_domain

    with fresh_domain() as did:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(did))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.setenv("RMW_IMPLEMENTATION", os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp"))
        yield did
