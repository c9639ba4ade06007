"""Build a policy by name: ``openai``, ``replay``, any policy registered in the
``captain.policies`` entry-point group (e.g. the teacher), or ``"module:factory"``.

A ``PolicySpec`` (a name and plain options) is what crosses process boundaries in
rollouts; each worker builds its own client from it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from captain_harness.core.episode.errors import PolicyError
from captain_harness.core.episode.policy.base import PolicyClient

ENTRY_POINT_GROUP = "captain.policies"


@dataclass(frozen=True)
class PolicySpec:
    """A policy by name with its options (picklable).

    ``openai`` options are the fields of ``OpenAIConfig`` (``base_url``, ``model``,
    ``temperature``, ...); ``replay`` takes ``record`` (a rows.jsonl or episode folder).
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)


def _openai(**options: Any) -> PolicyClient:
    from captain_harness.core.episode.policy.openai_client import OpenAIChatPolicy, OpenAIConfig

    if not options.get("base_url") or not options.get("model"):
        raise PolicyError("the openai policy needs base_url (e.g. http://127.0.0.1:8000/v1) and model")
    try:
        config = OpenAIConfig(**options)
    except TypeError as exc:
        raise PolicyError(f"openai policy: {exc}; options are the fields of OpenAIConfig") from exc
    return OpenAIChatPolicy(config)


def _replay(record: str | None = None, **_: Any) -> PolicyClient:
    from captain_harness.core.episode.policy.replay import ReplayPolicy

    if not record:
        raise PolicyError("the replay policy needs record=<rows.jsonl or episode folder>")
    return ReplayPolicy.from_record(record)


_BUILTIN = {"openai": _openai, "replay": _replay}


def available_policies() -> list[str]:
    """Names accepted by ``make_policy`` (besides ``module:factory``)."""
    return sorted(set(_BUILTIN) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def make_policy(spec: PolicySpec | str, **options: Any) -> PolicyClient:
    """The policy client named by ``spec``."""
    if isinstance(spec, PolicySpec):
        name, opts = spec.name, {**spec.options, **options}
    else:
        name, opts = spec, options
    if name in _BUILTIN:
        return _BUILTIN[name](**opts)
    eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name in eps:
        factory = eps[name].load()
    elif ":" in name:
        module, attr = name.split(":", 1)
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise PolicyError(f"cannot load policy factory {name!r}: {exc}") from exc
    else:
        raise PolicyError(f"unknown policy {name!r}; choose one of {', '.join(available_policies())} "
                          "or give module:factory")
    policy = factory(**opts)
    if not isinstance(policy, PolicyClient):
        raise PolicyError(f"policy factory {name!r} returned {type(policy).__name__}, not a PolicyClient")
    return policy
