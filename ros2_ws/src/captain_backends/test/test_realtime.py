"""Real-time scheduling of the threads that carry readings (``core.realtime``): only
threads named as Fast DDS's receive threads are made ``SCHED_FIFO``; others keep their
scheduling."""

from __future__ import annotations

import ctypes
import os
import sys
import threading

import pytest

from captain_backends.core.realtime import READINGS_PRIORITY, set_realtime_threads, thread_ids

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names from /proc (Linux)")

PR_SET_NAME = 15


def _named_threads(names: list[str]) -> tuple[dict[str, int], threading.Event]:
    """Threads that name themselves (as Fast DDS names its own) and wait; their ids."""
    libc = ctypes.CDLL(None, use_errno=True)
    ids: dict[str, int] = {}
    ready = threading.Barrier(len(names) + 1)
    release = threading.Event()

    def run(name: str) -> None:
        libc.prctl(PR_SET_NAME, name.encode())
        ids[name] = threading.get_native_id()
        ready.wait()
        release.wait(30.0)

    for name in names:
        threading.Thread(target=run, args=(name,), daemon=True).start()
    ready.wait()
    return ids, release


def _policy(tid: int) -> int:
    return os.sched_getscheduler(tid)


def test_only_receive_threads_become_real_time() -> None:
    before = thread_ids()
    ids, release = _named_threads(["dds.shm.7411", "dds.udp.7410", "dds.asyn.0.0", "dds.ev.0", "dds.shm.wdog"])
    try:
        assert set(ids.values()) <= thread_ids() - before
        changed, refused = set_realtime_threads(thread_ids() - before)
        if refused:
            pytest.skip(f"this machine refuses SCHED_FIFO: {refused}")
        assert sorted(changed) == ["dds.shm.7411", "dds.udp.7410"]
        for name, tid in ids.items():
            expected = os.SCHED_FIFO if name in changed else os.SCHED_OTHER
            assert _policy(tid) == expected, name
        assert os.sched_getparam(ids["dds.udp.7410"]).sched_priority == READINGS_PRIORITY
    finally:
        release.set()
