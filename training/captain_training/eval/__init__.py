"""Evaluation: paired comparison of two policies (exact McNemar, task-cluster bootstrap) and plots."""
