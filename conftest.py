"""Fixtures shared by every test tier (rootdir conftest: applies to all test folders)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def ros_domain(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """An isolated ROS_DOMAIN_ID for one test (coordinated across processes), with DDS
    discovery kept on localhost. Subprocesses started by the test inherit it."""
    from domain_coordinator import domain_id

    with domain_id() as did:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(did))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.setenv("RMW_IMPLEMENTATION", os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp"))
        yield did
