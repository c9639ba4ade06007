"""The episode layer of the harness (ROS-free).

* ``sandbox`` / ``isolation`` / ``kernel`` / ``channel`` / ``robot_client``: the sandboxed
  persistent Python session and the narrow channel its ``robot`` module uses to reach the host;
* ``router``: the host side of robot calls; ``gate``: the completion gate;
* ``cells`` / ``tokens``: cell results and token budgets; ``taskmd`` / ``prompt``: TASK.md and
  the fixed request texts;
* ``history``: context management and rendering; ``policy``: policy clients (and a scripted
  chat-completions server for tests and benchmarks);
* ``loop``: the ReAct loop; ``records`` / ``mcap_log``: episode records; ``outcome``;
* ``backend`` / ``runner`` / ``cli``: running episodes and rollouts; ``bench``: harness time
  per request (``captain bench episode``).

Import the submodules directly; this package imports nothing heavy.
"""
