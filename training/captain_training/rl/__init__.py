"""RL with the simulator critic (paper §3.3, Appendices A.2 and E).

The modules here are ROS-free and independent of the rollout machinery: they turn
recorded episodes (hidden snapshots, per-request outcomes, token ids and log-probabilities)
into features, critic values, returns, advantages and a policy-gradient loss.
Heavy libraries (torch, transformers) are imported only by the modules that need them.
"""
