"""The harness's host side, ROS-free: one driver and one ``RobotAPI`` as the harness node
hosts them (``robot_host``), the driver shared between threads (``locked_driver``) and the
served calls as plain data (``call_specs``). The ROS node in ``captain_harness.nodes``
only maps messages onto these."""
