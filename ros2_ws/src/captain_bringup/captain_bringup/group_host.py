"""One node group of a stack in this process: what ``captain bringup`` starts per group.

    python -m captain_bringup.group_host <stack> <group> [--ready-timeout-s S] \\
        --ros-args --params-file <merged.yaml> [-r __ns:=/<namespace>]

Builds the group's nodes (``core.stack.process_groups``) and hosts them with
``captain_harness.nodes.hosting.run_nodes`` (each node on the executor it asks for;
READY once all are up; SIGINT/SIGTERM hold the arm, release the drivers, exit 0). The
process also stops (as on SIGTERM) when the ``captain bringup`` that started it is gone,
so a killed bringup leaves no orphaned nodes behind.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time


def _watch_parent(parent_pid: int, period_s: float = 0.5) -> None:
    """SIGTERM to this process once its parent has exited (it is re-parented)."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(period_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent_watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring); returns the exit code."""
    from captain_backends.core.errors import BackendError
    from captain_bringup.core.stack import process_groups
    from captain_bringup.runner import node_builder

    argv = list(sys.argv[1:] if argv is None else argv)
    ros_args = argv[argv.index("--ros-args"):] if "--ros-args" in argv else []
    own = argv[:len(argv) - len(ros_args)]
    ready_timeout_s = 1e9
    if "--ready-timeout-s" in own:
        i = own.index("--ready-timeout-s")
        ready_timeout_s = float(own[i + 1])
        del own[i:i + 2]
    if len(own) != 2:
        print("usage: python -m captain_bringup.group_host <stack> <group> [--ready-timeout-s S] --ros-args ...",
              file=sys.stderr)
        return 2
    stack, group = own
    _watch_parent(os.getppid())
    from captain_harness.nodes.hosting import run_nodes

    try:
        groups = process_groups(stack)
        if group not in groups:
            raise BackendError(f"stack {stack} has no node group {group!r}; groups: {', '.join(groups)}")
        specs = groups[group]
        builders = [node_builder(spec) for spec in specs]
    except BackendError as exc:
        print(f"captain bringup {stack} [{group}]: {exc}", file=sys.stderr)
        return 2
    return run_nodes(builders, [f"captain_bringup_{group}", *ros_args],
                     label=", ".join(s.name for s in specs), ready_timeout_s=ready_timeout_s)


if __name__ == "__main__":
    raise SystemExit(main())
