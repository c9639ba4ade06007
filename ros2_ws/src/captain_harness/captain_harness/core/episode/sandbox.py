"""The sandboxed, persistent Python session of one episode (host side).

The session is its own process (``kernel.py``), started under bubblewrap when it is
available:

* filesystem: a fresh root with only ``/usr``, the Python runtime, numpy/scipy/Pillow
  and the session's three files mounted read-only, the episode workspace mounted
  read-write as the working directory (at a neutral path such as
  ``/data/captain/episodes/<episode>/workspace``), small size-limited tmpfs on ``/tmp``
  and ``/dev/shm``; the project, the simulator packages and every other host path are
  absent;
* namespaces: no network (loopback only), own PID, IPC and UTS namespaces, killed with
  its parent;
* identity: an unprivileged uid of its own (when the host runs as root), no new
  privileges (set-uid binaries do not elevate);
* resource limits: address space, CPU time, file size, open files and processes, plus a
  workspace disk quota watched by the host.

Where namespaces are not permitted the session still runs with what is available
(resource limits, the uid drop, a network namespace via ``unshare`` if possible) and
``protections`` says which protections are active.

The OS mechanisms (bubblewrap command line, resource limits, uid) are in
``isolation.py``; starting, watching and ending the session process in
``session_process.py``; the quota walk in ``workspace_quota.py``; the configuration and
reports (``SandboxConfig``, ``Protections``, ``CellRun``) in ``session_types.py``. This
module runs the cells. The only way out of the session is the narrow channel
(``channel.py``): robot calls as JSON messages, answered by the host's call handler. A cell that runs past its timeout
is interrupted with SIGINT (the namespace survives); one that does not stop within a
grace period, or a session process that dies, is replaced by a fresh one and the cell
output says so.

The host's invariant
--------------------
**The host never opens, follows, writes or blocks on anything inside the
session-writable tree** (the workspace). Concretely:

* Files the host produces for the session (camera frames, ``TASK.md``, ``NOTES.md``'s
  template) are written into a host-only *published* folder beside the workspace. The
  session sees that folder read-only (a read-only bind mount under bubblewrap; a folder
  the session's uid cannot write otherwise), and the kernel copies each published file
  into the workspace itself, as the session's uid, through a temporary file and a
  rename. A link, FIFO, device node or directory the session plants at a frame's name
  can therefore only affect the session's own view.
* Records (rows, events, outcome, frames, ``session.log``) are written only outside the
  workspace, where the session cannot write.
* The host reads workspace files only to attach images a cell asks for, through
  ``records.read_workspace_file``: every component opened relative to a directory fd
  with ``O_NOFOLLOW``, the file with ``O_PATH`` first (no open side effects on devices or
  FIFOs), checked to be a regular file with one link, then reopened read-only.
* The quota walk uses only directory fds (``O_NOFOLLOW``) and ``lstat``-like calls, is
  bounded in depth and entries, and removes files with ``unlinkat`` relative to its
  directory fds.

Further limits that hold whatever a cell does: every robot call runs under a host-side
wall-clock limit (``deadline.py``); the workspace quota is checked after every cell and
by a watcher thread every second (over quota: the session is ended and restarted, the
largest files it wrote are removed, the cell output and the record say so);
``session.log`` is capped (``SandboxConfig.log_bytes``); new user namespaces are refused
by a seccomp filter in the kernel; channel messages that do not come from the running
cell (stale threads, forged ``done`` messages without the cell's token) are ignored.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Callable

from captain_harness.core.episode.channel import ChannelClosedError, ProtocolViolationError
from captain_harness.core.episode.deadline import call_deadline
from captain_harness.core.episode.errors import RobotCallTimeoutError, SessionError
from captain_harness.core.episode.session_process import SessionProcess
from captain_harness.core.episode.session_types import CellRun, Protections, SandboxConfig
from captain_harness.core.episode.workspace_quota import (
    MAX_WORKSPACE_DEPTH,
    MAX_WORKSPACE_ENTRIES,
    WorkspaceUsage,
    enforce_quota,
    workspace_usage,
)

__all__ = [
    "MAX_WORKSPACE_DEPTH",
    "MAX_WORKSPACE_ENTRIES",
    "CallHandler",
    "CellRun",
    "Protections",
    "SandboxConfig",
    "SandboxSession",
    "WorkspaceUsage",
    "enforce_quota",
    "workspace_usage",
]

_log = logging.getLogger(__name__)

#: Signature of the host's handler of one robot call: (name, args, kwargs) -> message
#: with ``result`` (the result dict), ``receipt`` and optionally ``publish`` (names of
#: published files the call wrote, for the session to copy into its workspace).
CallHandler = Callable[[str, list, dict], dict]


class SandboxSession(SessionProcess):
    """The persistent, sandboxed Python session of one episode. See the module docstring.

    Args:
        workspace: the episode's workspace folder on the host (created if missing).
        specs: the robot calls the session's ``robot`` module defines: dicts with ``name``,
            ``signature`` (text) and ``doc``.
        config: limits and isolation.
        published: the host-only folder of files published to the session (frames,
            ``TASK.md``); read-only to the session, copied into its workspace by the kernel.
            None: nothing is published.
    """


    # -------------------------------------------------------------------- cells
    def run_cell(self, index: int, code: str, timeout_s: float, on_call: CallHandler, *,
                 call_timeout_s: float | None = None, episode_deadline: float | None = None) -> CellRun:
        """Run one cell. Robot calls are answered by ``on_call`` while the cell runs.

        Never raises for anything the cell does: a timeout interrupts the cell, a hang past
        the grace period or a dead session process restarts the session, and the returned
        ``CellRun`` says what happened.

        Args:
            index: the cell's number (calls and ``done`` must carry it).
            code: the cell's source.
            timeout_s: the cell's time limit, s.
            on_call: answers robot calls.
            call_timeout_s: host-side wall-clock limit of one robot call, s (None: none).
            episode_deadline: ``time.monotonic()`` at which the episode's wall time ends; a
                robot call is also cut there.

        Raises:
            RobotCallTimeoutError: a robot call ran past its limit (the episode must end:
                the robot's state is unknown and the call may still be running).
        """
        run = CellRun()
        started = time.monotonic()
        if self._violation is not None or not self.alive():
            reason = self._violation or "the session process was not running"
            run.quota_exceeded = self._violation is not None
            self._violation = None
            if run.quota_exceeded:
                self._kill(wait_s=0.5)
                self._enforce_quota(run)
            self.restart(reason)
            run.restarted, run.restart_reason = True, reason
        assert self._channel is not None
        deadline = started + max(0.0, timeout_s)
        hard_deadline: float | None = None
        next_quota_check = started + 1.0
        token = secrets.token_hex(16)
        try:
            self._channel.send({"op": "exec", "cell": index, "code": code, "token": token})
            while True:
                # Deadlines and the quota are checked on every message too, so a cell that
                # floods the channel with calls cannot outlive its time limit.
                now = time.monotonic()
                if hard_deadline is None and now >= deadline:
                    run.timed_out = True
                    self._interrupt()
                    hard_deadline = now + self.config.interrupt_grace_s
                elif hard_deadline is not None and now >= hard_deadline:
                    self._crash(run, f"the cell did not stop within {self.config.interrupt_grace_s:g} s "
                                     "after it was interrupted")
                    break
                if now >= next_quota_check:
                    next_quota_check = now + 1.0
                    over = self._over_quota()
                    if over is not None:
                        run.quota_exceeded = True
                        self._crash(run, over, cleanup=True)
                        break
                wait = (hard_deadline if hard_deadline is not None else deadline) - now
                message = self._channel.recv(timeout_s=max(0.0, min(wait, 0.5)))
                if message is None:
                    if not self.alive():
                        raise ChannelClosedError("the session process ended")
                    continue
                op = message.get("op")
                if op == "call":
                    if message.get("cell") != index:
                        run.ignored_messages += 1
                        reply = _failed_reply(str(message.get("name", "robot"))[:80], "cancelled",
                                              "robot calls are answered only for the running cell; this one "
                                              "came from a thread an earlier cell left running")
                    else:
                        run.calls += 1
                        if run.timed_out:
                            reply = _timed_out_reply(str(message.get("name", ""))[:80])
                        else:
                            reply = self._handle_call(message, on_call, call_timeout_s, episode_deadline)
                    reply.update(op="result", id=message.get("id"))
                    self._channel.send(reply)
                elif (op == "done" and message.get("cell") == index
                      and hmac.compare_digest(str(message.get("token", "")), token)):
                    run.stdout = str(message.get("stdout") or "")
                    run.error = None if message.get("error") is None else str(message.get("error"))
                    run.images = [str(x) for x in message.get("images") or []][:16]
                    run.notes = [str(x)[:500] for x in message.get("notes") or []][:16]
                    try:
                        run.code_s = max(0.0, float(message.get("code_s") or 0.0))
                    except (TypeError, ValueError, OverflowError):
                        run.code_s = 0.0
                    break
                else:  # a stale or forged message (a thread of the cell): not the cell's end
                    run.ignored_messages += 1
        except (ChannelClosedError, ProtocolViolationError, OSError) as exc:
            self._crash(run, self._exit_reason(exc), cleanup=self._violation is not None)
            self._violation = None
        if run.ignored_messages:
            run.notes.append(f"[the harness ignored {run.ignored_messages} channel message(s) that did not come "
                             "from this cell (threads left running, or messages without the cell's token)]")
        if not run.restarted:
            over = self._over_quota()
            if over is not None:
                run.quota_exceeded = True
                removed = self._enforce_quota(run)
                run.notes.append(
                    f"[{over}; removed the largest files the session wrote: {', '.join(removed[:8]) or 'none'}]"
                )
        run.duration_s = time.monotonic() - started
        return run

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _handle_call(message: dict, on_call: CallHandler, call_timeout_s: float | None = None,
                     episode_deadline: float | None = None) -> dict:
        name = message.get("name")
        args = message.get("args")
        kwargs = message.get("kwargs")
        if not isinstance(name, str) or not isinstance(args, list) or not isinstance(kwargs, dict):
            return _failed_reply("robot", "invalid_argument", "malformed robot call")
        name = name[:80]
        limit, cause = call_timeout_s, "call_timeout"
        if episode_deadline is not None:
            left = max(0.05, episode_deadline - time.monotonic())
            if limit is None or left < limit:
                limit, cause = left, "wall_time"
        reply: dict | None = None
        with call_deadline(limit) as guard:
            try:
                reply = on_call(name, args, kwargs)
            except Exception as exc:  # the session only ever gets a result dict
                _log.error("robot call %s failed on the host", name, exc_info=True)
                reply = _failed_reply(name, "internal_error", f"the harness failed on this call "
                                                              f"({type(exc).__name__}); try again or use another call")
        if reply is None and guard.fired:
            raise RobotCallTimeoutError(name, guard.limit_s, cause)
        return reply if reply is not None else _failed_reply(name, "internal_error", "no answer")

    def _crash(self, run: CellRun, reason: str, cleanup: bool = False) -> None:
        self._kill(wait_s=0.5)
        if cleanup:
            run.quota_exceeded = True
            removed = self._enforce_quota(run)
            reason += f"; removed the largest files the session wrote: {', '.join(removed[:8]) or 'none'}"
        run.restarted = True
        run.restart_reason = reason
        try:
            self.restart(reason)
        except SessionError as exc:
            run.restart_reason = f"{reason}; the session could not be restarted ({exc})"


def _failed_reply(name: str, category: str, message: str, note: str = "") -> dict:
    result = {"success": False, "executed": False, "failure_category": category, "message": message,
              "value": None, "diagnostics": {}, "budget": {}}
    receipt = f"{name}: FAILED {category}" + (f"; {note}" if note else "")
    return {"result": result, "receipt": receipt[:300]}


def _timed_out_reply(name: str) -> dict:
    return _failed_reply(name, "timeout", "the cell ran past its time limit; robot calls are refused until the "
                                          "next cell", note="cell time limit reached")
