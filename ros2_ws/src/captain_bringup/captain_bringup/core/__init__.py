"""ROS-free core of the bringup: node descriptions and parameter schemas."""
