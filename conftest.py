"""Fixtures shared by every test tier (rootdir conftest: applies to all test folders)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any test: the stack's Fast DDS profile for this process's own participants
    (and the processes tests start), and no Fast DDS shared-memory files left by processes
    that died (``dds_profile.remove_stale_shm``): a port file outlives a killed process and
    keeps the settings of whoever created it."""
    try:
        from captain_perception.nodes.dds_profile import remove_stale_shm, use_profile
    except ImportError:  # the ROS workspace is not installed: the pure-Python tiers still run
        return
    use_profile()
    removed = remove_stale_shm()
    if removed:
        print(f"removed {len(removed)} stale Fast DDS shared-memory files from /dev/shm")


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
