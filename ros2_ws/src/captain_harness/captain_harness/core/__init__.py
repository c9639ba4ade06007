"""ROS-free core of the harness: results, budgets, motion, session, episode loop."""
