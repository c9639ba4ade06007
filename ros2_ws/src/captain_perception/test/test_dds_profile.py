"""The stack's Fast DDS profile (``captain_perception.nodes.dds_profile``): when it is
chosen, that the shipped XML is one Fast DDS accepts, and that a participant created
with it gets the large shared-memory segment."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from captain_perception.nodes.dds_profile import PROFILE, profile_env, use_profile

NS = {"dds": "http://www.eprosima.com"}
#: a 512 x 512 RGB (uint8) + depth (float32) frame pair, bytes
FRAME_PAIR = 512 * 512 * 3 + 512 * 512 * 4


def test_profile_is_chosen_unless_another_is():
    assert profile_env({}) == {"FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE)}
    assert profile_env({"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}) == {"FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE)}
    # a site's own profile (either variable) wins; another RMW has no use for it; off keeps Fast DDS's defaults
    assert profile_env({"FASTDDS_DEFAULT_PROFILES_FILE": "/site.xml"}) == {}
    assert profile_env({"FASTRTPS_DEFAULT_PROFILES_FILE": "/site.xml"}) == {}
    assert profile_env({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}) == {}
    assert profile_env({"CAPTAIN_DDS_PROFILE": "off"}) == {}
    env: dict[str, str] = {"PATH": "/bin"}
    assert use_profile(env) == {"FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE)}
    assert env["FASTDDS_DEFAULT_PROFILES_FILE"] == str(PROFILE) and env["PATH"] == "/bin"
    assert use_profile(env) == {}  # already chosen


def test_profile_keeps_both_transports_and_holds_frame_pairs():
    root = ET.parse(PROFILE).getroot()
    descriptors = {d.findtext("dds:transport_id", namespaces=NS): d
                   for d in root.iterfind(".//dds:transport_descriptor", NS)}
    kinds = {d.findtext("dds:type", namespaces=NS) for d in descriptors.values()}
    assert kinds == {"SHM", "UDPv4"}  # this machine and the others, as Fast DDS's built-in ones
    shm = next(d for d in descriptors.values() if d.findtext("dds:type", namespaces=NS) == "SHM")
    assert int(shm.findtext("dds:segment_size", namespaces=NS)) >= 4 * FRAME_PAIR
    participant = root.find(".//dds:participant", NS)
    assert participant.get("is_default_profile") == "true"
    used = [t.text for t in participant.iterfind(".//dds:userTransports/dds:transport_id", NS)]
    assert sorted(used) == sorted(descriptors)


_CHILD = r"""
import glob, os, sys, time, rclpy
def segments():
    return {n: os.stat('/dev/shm/' + n).st_size for n in os.listdir('/dev/shm') if n.startswith('fastdds_')}
def shm_thread_sleeps():
    # voluntary context switches of each shared-memory receive thread, by its port number
    found = {}
    for task in glob.glob('/proc/self/task/*'):
        with open(task + '/comm') as f:
            name = f.read().strip()
        if name.startswith('dds.shm.') and name != 'dds.shm.wdog':
            with open(task + '/status') as f:
                found[int(name.split('.')[-1])] = next(
                    int(l.split()[1]) for l in f if l.startswith('voluntary_ctxt_switches'))
    return found
before = segments()
rclpy.init()
node = rclpy.create_node('dds_profile_probe')
new = {n: s for n, s in segments().items() if n not in before}
print('LARGEST', max(new.values(), default=0), flush=True)
time.sleep(0.5)
first, t0 = shm_thread_sleeps(), time.monotonic()
time.sleep(2.0)
last, t1 = shm_thread_sleeps(), time.monotonic()
# this domain's user-traffic port (the other, 7000 and up, may be a file another process left)
user = max(port for port in first if port in last)
print('IDLE_WAKES_PER_S', (last[user] - first[user]) / (t1 - t0), flush=True)
node.destroy_node()
rclpy.shutdown()
"""


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
@pytest.mark.parametrize("with_profile", [True, False])
def test_participant_gets_the_profile_segment(with_profile):
    """A fresh process's participant: with the profile its shared-memory segment holds
    several frame pairs (with Fast DDS's defaults less than one), and its idle shared-memory
    listeners wake every 30 ms, a third of the profile's healthy-check timeout (Fast DDS's
    default: every 333 ms), so that another participant opening its port waits at most
    30 ms for the liveness check (see fastdds_frames.xml)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FASTDDS_DEFAULT_PROFILES_FILE",
                                                              "FASTRTPS_DEFAULT_PROFILES_FILE")}
    env["RMW_IMPLEMENTATION"] = "rmw_fastrtps_cpp"
    env["ROS_DOMAIN_ID"] = "97"
    if with_profile:
        use_profile(env)
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "XMLPARSER" not in out.stderr and "XMLPARSER" not in out.stdout, out.stderr[-2000:]
    largest = int(next(line for line in out.stdout.splitlines() if line.startswith("LARGEST")).split()[1])
    wakes = float(next(line for line in out.stdout.splitlines() if line.startswith("IDLE_WAKES_PER_S")).split()[1])
    if with_profile:
        assert largest >= 4 * FRAME_PAIR
        assert 20.0 <= wakes <= 40.0, wakes  # every 30 ms
    else:
        assert 0 < largest < FRAME_PAIR
        assert 1.0 <= wakes <= 5.0, wakes  # every 333 ms


def test_successive_domains_differ():
    """``domain_coordinator``'s own selector gave every test domain 1 (and so what the tests
    before it left there); ``fresh_domain`` walks the ids."""
    from captain_perception.nodes.dds_profile import fresh_domain

    seen = []
    for _ in range(5):
        with fresh_domain() as did:
            seen.append(did)
    assert len(set(seen)) == 5, seen
    assert all(1 <= did <= 100 for did in seen), seen


def test_stale_shared_memory_files_are_those_no_process_uses(tmp_path):
    """Files a live process maps (a port) or holds open (a lock file) are kept, in this
    process or in another; the rest of Fast DDS's files are stale; other files are not
    touched."""
    import mmap

    from captain_perception.nodes.dds_profile import remove_stale_shm, stale_shm_files

    for name in ("fastdds_port7001", "fastdds_port7002", "fastdds_port7003", "fastdds_port7001_el",
                 "sem.fastdds_port7003_mutex", "fastdds_0123456789abcdef", "other_file"):
        (tmp_path / name).write_bytes(b"\0" * 4096)
    with open(tmp_path / "fastdds_port7001", "r+b") as port, open(tmp_path / "fastdds_port7001_el", "rb"):
        mapped = mmap.mmap(port.fileno(), 4096)
        holder = subprocess.Popen(  # another process maps the segment
            [sys.executable, "-c", "import mmap, sys, time\n"
             f"f = open({str(tmp_path / 'fastdds_0123456789abcdef')!r}, 'r+b')\n"
             "m = mmap.mmap(f.fileno(), 4096); f.close(); print('MAPPED', flush=True); time.sleep(60)"],
            stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "MAPPED"
            stale = {path.name for path in stale_shm_files(tmp_path)}
            assert stale == {"fastdds_port7002", "fastdds_port7003", "sem.fastdds_port7003_mutex"}
            assert {path.name for path in remove_stale_shm(tmp_path)} == stale
        finally:
            holder.kill()
            holder.wait()
        mapped.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "fastdds_0123456789abcdef", "fastdds_port7001", "fastdds_port7001_el", "other_file"]
    assert {path.name for path in stale_shm_files(tmp_path)} == {
        "fastdds_0123456789abcdef", "fastdds_port7001", "fastdds_port7001_el"}
