# Source this file to get the CaPtain venv and the ROS 2 environment:
#   source scripts/env.sh
# It activates .venv (Python 3.11 with ROS 2 Kilted wheels), points ament at the venv
# and at the built workspace, keeps DDS discovery on this machine, and selects Fast DDS.
# On a machine with a full ROS 2 install, source /opt/ros/<distro>/setup.bash and the
# workspace's install/setup.bash instead (see README).

_captain_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export CAPTAIN_ROOT="$_captain_root"
if [ -f "$_captain_root/.venv/bin/activate" ]; then
  VIRTUAL_ENV_DISABLE_PROMPT=1 . "$_captain_root/.venv/bin/activate"
fi
export AMENT_PREFIX_PATH="$_captain_root/.venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$_captain_root/.venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
if [ -f "$_captain_root/ros2_ws/install/local_setup.bash" ] && [ -n "${BASH_VERSION:-}" ]; then
  . "$_captain_root/ros2_ws/install/local_setup.bash"
elif [ -f "$_captain_root/ros2_ws/install/local_setup.sh" ]; then
  COLCON_CURRENT_PREFIX="$_captain_root/ros2_ws/install" . "$_captain_root/ros2_ws/install/local_setup.sh"
fi
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# Kilted ignores ROS_LOCALHOST_ONLY; without this, discovery multicasts off the machine.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
export PYOPENGL_PLATFORM="${PYOPENGL_PLATFORM:-egl}"
unset _captain_root
