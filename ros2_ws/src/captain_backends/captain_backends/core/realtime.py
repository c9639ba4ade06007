"""Real-time scheduling of the threads that carry robot readings, as ros2_control does
for its control loop (``SCHED_FIFO`` when the kernel permits, plain scheduling else).
ROS-free.

The XR1 driver judges the age of joint states against 100 ms: on a loaded machine a
thread of normal priority that stamps or publishes readings can wait longer than that
for a core. The threads that do so (the driver's receive thread, the hardware side's
periodic loop in the twin and the fake hardware) ask for ``SCHED_FIFO`` at
``READINGS_PRIORITY``. They sleep or block most of the time, and the kernel's real-time
throttling (``/proc/sys/kernel/sched_rt_runtime_us``) bounds what they can take.

Of a Fast DDS participant only the threads that receive (``dds.shm.<port>``,
``dds.udp.<port>``) are made real-time (``set_realtime_threads``): its discovery,
timed-event and asynchronous sender threads stay at normal priority. Those run for
hundreds of milliseconds at a stretch while participants come and go, and threads of
equal ``SCHED_FIFO`` priority do not time-slice, so at real-time priority they would hold
the receive threads (and everything else) back for as long.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: SCHED_FIFO priority of the reading threads (ros2_control's controller manager uses 50).
READINGS_PRIORITY = 50


def set_realtime(priority: int = READINGS_PRIORITY) -> str:
    """Give the calling thread ``SCHED_FIFO`` at ``priority``.

    Returns:
        ``""`` on success, else why not (no permission, no such policy here); the thread
        keeps its scheduling then.
    """
    return _set_fifo(0, priority)


def _set_fifo(tid: int, priority: int) -> str:
    """``SCHED_FIFO`` at ``priority`` for thread ``tid`` of this process (0: the caller);
    ``""`` or why not."""
    if not hasattr(os, "sched_setscheduler"):
        return "real-time scheduling is not available on this platform"
    try:
        os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(int(priority)))
    except (PermissionError, OSError) as exc:
        return f"SCHED_FIFO refused ({exc}); grant CAP_SYS_NICE or an rtprio limit to use it"
    return ""


#: Name prefixes of the Fast DDS threads that receive data (shared memory, UDP).
RECEIVE_THREAD_PREFIXES = ("dds.shm.", "dds.udp.")
#: Fast DDS's shared-memory watchdog (one per process; not a receive thread).
SHM_WATCHDOG = "dds.shm.wdog"


def is_receive_thread(name: str) -> bool:
    """Whether a thread name is one of Fast DDS's receive threads."""
    return name.startswith(RECEIVE_THREAD_PREFIXES) and name != SHM_WATCHDOG


def thread_ids() -> set[int]:
    """Ids of this process's threads (Linux; empty elsewhere)."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def thread_name(tid: int) -> str:
    """The name of thread ``tid`` of this process ("" when it is gone)."""
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def set_realtime_threads(tids: Iterable[int], priority: int = READINGS_PRIORITY) -> tuple[list[str], str]:
    """Give ``SCHED_FIFO`` at ``priority`` to those of ``tids`` that are Fast DDS receive
    threads (``is_receive_thread``; e.g. the ones a new participant just created).

    Returns:
        (names of the threads changed, ``""`` or why not where the kernel refused).
    """
    changed: list[str] = []
    for tid in sorted(tids):
        name = thread_name(tid)
        if not is_receive_thread(name):
            continue
        refused = _set_fifo(tid, priority)
        if refused:
            return changed, f"{name}: {refused}"
        changed.append(name)
    return changed, ""
