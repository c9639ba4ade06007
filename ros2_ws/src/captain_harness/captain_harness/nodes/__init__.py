"""ROS 2 nodes of the harness (thin wrappers over the core)."""
