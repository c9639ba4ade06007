"""Real-time scheduling of the threads that carry robot readings, as ros2_control does
for its control loop (``SCHED_FIFO`` when the kernel permits, plain scheduling else).
ROS-free.

The XR1 driver judges the age of joint states against 100 ms: on a loaded machine a
thread of normal priority that stamps or publishes readings can wait longer than that
for a core. The threads that do so (the driver's receive thread, the hardware side's
periodic loop in the twin and the fake hardware) ask for ``SCHED_FIFO`` at
``READINGS_PRIORITY``. They sleep or block most of the time, and the kernel's real-time
throttling (``/proc/sys/kernel/sched_rt_runtime_us``) bounds what they can take.
Threads they create afterwards (Fast DDS's receive threads, when the context is created
in such a thread) inherit the policy.
"""

from __future__ import annotations

import os

#: SCHED_FIFO priority of the reading threads (ros2_control's controller manager uses 50).
READINGS_PRIORITY = 50


def set_realtime(priority: int = READINGS_PRIORITY) -> str:
    """Give the calling thread ``SCHED_FIFO`` at ``priority``.

    Returns:
        ``""`` on success, else why not (no permission, no such policy here); the thread
        keeps its scheduling then.
    """
    if not hasattr(os, "sched_setscheduler"):
        return "real-time scheduling is not available on this platform"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(priority)))
    except (PermissionError, OSError) as exc:
        return f"SCHED_FIFO refused ({exc}); grant CAP_SYS_NICE or an rtprio limit to use it"
    return ""

