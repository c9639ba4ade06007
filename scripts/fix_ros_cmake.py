"""Point the ROS 2 wheels' CMake exports at this venv's Python and numpy headers.

The Kilted wheels on PyPI were built in a manylinux image whose interpreter lives at
/opt/python/cp311-cp311; their exported CMake targets name its include directories.
This rewrites those paths in ``$VENV/share/**/*.cmake`` so that ``colcon build`` of an
interface package (rosidl_generate_interfaces) works against the venv. Idempotent.

Usage: python scripts/fix_ros_cmake.py [VENV]
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import numpy as np

BUILD_PREFIX = "/opt/python/cp311-cp311"


def main(venv: Path) -> int:
    """Rewrite the paths; print how many files changed."""
    py_include = sysconfig.get_paths()["include"]
    np_include = np.get_include()
    replacements = [
        (f"{BUILD_PREFIX}/lib/python3.11/site-packages/numpy/_core/include", np_include),
        (f"{BUILD_PREFIX}/include/python3.11", py_include),
    ]
    changed = 0
    for path in (venv / "share").rglob("*.cmake"):
        text = path.read_text(errors="surrogateescape")
        if BUILD_PREFIX not in text:
            continue
        new = text
        for old, repl in replacements:
            new = new.replace(old, repl)
        if new != text:
            path.write_text(new, errors="surrogateescape")
            changed += 1
    print(f"fix_ros_cmake: {changed} CMake files pointed at {py_include} and {np_include}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else sys.prefix)))
