"""The XR1 real-robot driver over ros2_control's standard topics (see README.md).

ROS-free: configuration schema and loader, safety logic, the stand-in arm description
and the driver itself; the ROS 2 transport lives in ``captain_backends.nodes`` and is
imported only when a driver is configured.
"""

from captain_backends.core.xr1.config import XR1Config, default_config_path, describe_schema, load_config
from captain_backends.core.xr1.driver import XR1Driver
from captain_backends.core.xr1.errors import CameraUnavailableError, XR1ConfigError, XR1ConnectionError

__all__ = [
    "CameraUnavailableError", "XR1Config", "XR1ConfigError", "XR1ConnectionError", "XR1Driver",
    "default_config_path", "describe_schema", "load_config",
]
