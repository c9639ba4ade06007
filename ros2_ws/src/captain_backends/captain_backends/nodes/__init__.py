"""ROS 2 nodes of the backends (thin wrappers over the core)."""
