"""Exceptions of the RL core. Every one derives from ``RLError``."""

from __future__ import annotations


class RLError(Exception):
    """Base of every error raised by ``captain_training.rl``."""


class FeatureError(RLError):
    """A snapshot cannot be turned into critic features."""


class CriticError(RLError):
    """The critic was given inputs it cannot use (unknown task, wrong width, bad file)."""


class CreditError(RLError):
    """Returns, costs or advantages were asked for with inconsistent inputs."""


class StaleRolloutError(RLError):
    """A rollout came from a policy version older than the staleness limit allows."""


class ConfigError(RLError):
    """An RL configuration file or value is invalid."""
