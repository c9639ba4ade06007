"""ROS-free core of perception and measurement."""
