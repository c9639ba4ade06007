"""The Fast DDS profile the stack's processes use for camera frames (ROS-free).

``fastdds_frames.xml`` (beside this module) is Fast DDS's built-in transports (shared
memory on this machine, UDPv4 to others) with a 16 MB shared-memory segment instead of
the built-in 512 KB: a perception request carrying a 512 x 512 RGB + depth frame pair is
~1.8 MB, and with the small segment its fragments wait for buffers to be released. Each
participant's segment is a /dev/shm file of that size, allocated when it starts.

Fast DDS reads ``FASTDDS_DEFAULT_PROFILES_FILE`` once per process, when the process's
first participant is created, and a participant writes into its own segment, so both
ends of a request need it from the start: ``captain`` commands, ``captain bringup``'s
children, the launch files and ``perception_node`` set it unless it is already set (a
site's own profile wins) or the RMW is not Fast DDS. ``CAPTAIN_DDS_PROFILE=off`` keeps
Fast DDS's defaults.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
from collections.abc import Iterator, MutableMapping
from pathlib import Path

#: the profile file shipped with the package
PROFILE = Path(__file__).with_name("fastdds_frames.xml")
#: the variables Fast DDS reads its XML profiles from (the second is the older name)
PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")


def profile_env(env: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """The variables to add to ``env`` (default ``os.environ``) so that a process uses the
    stack's Fast DDS profile: ``{}`` when a profile is already chosen, the RMW is not Fast
    DDS, or ``CAPTAIN_DDS_PROFILE`` is ``off``."""
    env = os.environ if env is None else env
    if env.get("CAPTAIN_DDS_PROFILE", "").lower() in ("off", "0", "false", "no"):
        return {}
    if any(env.get(name) for name in PROFILE_VARIABLES):
        return {}
    if env.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") not in ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp"):
        return {}
    return {"FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE)}


def use_profile(env: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Add ``profile_env(env)`` to ``env`` (default ``os.environ``: call it before the
    process's first ROS participant) and return what was added."""
    env = os.environ if env is None else env
    added = profile_env(env)
    env.update(added)
    return added


#: successive ROS_DOMAIN_ID candidates of this process, from a random start (``next_domain``)
_DOMAINS = itertools.count(random.SystemRandom().randrange(100))


def next_domain() -> int:
    """The next ROS_DOMAIN_ID candidate (1..100) for ``domain_coordinator``: successive calls
    in a process walk through the ids from a random start.

    ``domain_coordinator``'s own selector starts at 1 on every call, so every test of a run
    got domain 1 and met what the tests before it left in that domain: processes still
    shutting down, and the shared-memory ports of killed processes, which Fast DDS keys by
    domain and participant id and reuses. Walking the ids, a domain comes back only after
    100 others."""
    return next(_DOMAINS) % 100 + 1


@contextlib.contextmanager
def fresh_domain() -> Iterator[int]:
    """Reserve a ROS_DOMAIN_ID no other process on this machine holds (``domain_coordinator``
    binds a port per id), taking ids in ``next_domain`` order, for the ``with`` block."""
    from domain_coordinator import domain_id

    with domain_id(selector=next_domain) as did:
        yield did


@contextlib.contextmanager
def localhost_domain() -> Iterator[int]:
    """``fresh_domain`` set in this process's environment for the ``with`` block
    (``ROS_DOMAIN_ID``, discovery on localhost, Fast DDS unless an RMW is chosen), so
    contexts made and processes started inside it use it; the variables are restored after."""
    keys = ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "RMW_IMPLEMENTATION")
    saved = {k: os.environ.get(k) for k in keys}
    with fresh_domain() as did:
        os.environ["ROS_DOMAIN_ID"] = str(did)
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
        try:
            yield did
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def stale_shm_files(shm_dir: Path = Path("/dev/shm")) -> list[Path]:
    """This user's Fast DDS shared-memory files in ``shm_dir`` (segments, ports, their lock
    files and named mutexes) that no running process has mapped or open.

    A process that exits cleanly removes its files; a killed one leaves them, and a port file
    also stays when one of its writers was killed. Such a port keeps the settings of the
    process that created it, among them the healthy-check timeout (``fastdds_frames.xml``),
    and the metatraffic ports (7000 and up, whatever the domain) are reused by every later
    participant on the machine. ``fastdds shm clean`` removes only the files whose owner's
    lock is released, not those ports. Removing a file while a process is just opening it
    would leave that process on an orphaned copy: remove them when no ROS 2 process is
    starting (before a test session, before bringing up a robot)."""
    uid = os.getuid()
    prefix = str(shm_dir).rstrip("/") + "/"
    try:
        candidates = [path for path in shm_dir.iterdir()
                      if path.name.startswith(("fastdds_", "sem.fastdds_")) and path.stat().st_uid == uid]
    except FileNotFoundError:
        return []
    in_use: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            with open(proc / "maps") as maps:
                for line in maps:
                    at = line.find(prefix)
                    if at >= 0:
                        in_use.add(line[at:].rstrip("\n").removesuffix(" (deleted)"))
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith(prefix):
                        in_use.add(target)
        except OSError:
            continue  # gone meanwhile, or another user's (it cannot write this user's files)
    return sorted(path for path in candidates if str(path) not in in_use)


def remove_stale_shm(shm_dir: Path = Path("/dev/shm")) -> list[Path]:
    """Remove ``stale_shm_files(shm_dir)``; returns what was removed."""
    removed = []
    for path in stale_shm_files(shm_dir):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def clean_command(dry_run: bool = False) -> None:
    """Remove the Fast DDS shared-memory files in /dev/shm that no running process uses
    (left by killed processes; a port file keeps the settings of the process that created
    it). Run it when no ROS 2 process is starting, e.g. before bringing up a robot."""
    stale = stale_shm_files() if dry_run else remove_stale_shm()
    for path in stale:
        print(path)
    print(f"{len(stale)} stale Fast DDS shared-memory files {'found' if dry_run else 'removed'}")
