"""ROS 2 nodes of perception (thin wrappers over the core)."""
