"""Registry: ids, aliases, params overrides and the errors for unknown names."""

from __future__ import annotations

import pytest

import nitro
from nitro.core import registry
from nitro.envs.classic.cartpole import CartPole

BUILTIN = ["CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1", "Acrobot-v1"]


@pytest.fixture
def scratch_registry(monkeypatch):
    """A copy of the registry that the test may add to; the real one is restored afterwards."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))


def test_builtin_envs_are_registered():
    ids = [s.id for s in nitro.registered()]
    assert all(i in ids for i in BUILTIN)
    for i in BUILTIN:
        env = nitro.make_env(i)
        assert env.params.max_episode_steps > 0


def test_unknown_id_lists_known_ones():
    with pytest.raises(KeyError) as e:
        nitro.make("CartPol-v1")
    msg = str(e.value)
    assert "unknown env id 'CartPol-v1'" in msg and "Did you mean" in msg and "'CartPole-v1'" in msg
    for i in BUILTIN:
        assert i in msg
    with pytest.raises(KeyError, match="Registered envs:"):
        nitro.make_env("zzz-nothing-like-it")


def test_unknown_param_lists_valid_ones():
    with pytest.raises(TypeError) as e:
        nitro.make("Pendulum-v1", gravity=9.81)  # Gymnasium's name is g
    msg = str(e.value)
    assert "Pendulum-v1 has no parameter(s) gravity" in msg
    assert "valid parameters:" in msg and "g," in msg and "max_torque" in msg


def test_params_override():
    env = nitro.make_env("Pendulum-v1", g=9.81, max_episode_steps=50)
    assert env.params.g == 9.81 and env.params.max_episode_steps == 50
    assert nitro.make_env("Pendulum-v1").params.g == 10.0  # overrides do not leak into later makes


def test_aliases_and_case():
    for name in ("cartpole", "CARTPOLE-V1", "CartPole-v1"):
        assert type(nitro.make_env(name)) is CartPole
    assert registry.spec("acrobot").id == "Acrobot-v1"
    assert registry.spec("MountainCarContinuous").id == "MountainCarContinuous-v0"


def test_register_custom_env_with_defaults(scratch_registry):
    nitro.register("ShortCartPole-v0", CartPole, aliases=("shortpole",), max_episode_steps=10)
    assert nitro.make_env("shortpole").params.max_episode_steps == 10
    assert nitro.make_env("ShortCartPole-v0", max_episode_steps=20).params.max_episode_steps == 20
    nitro.register("Lazy-v0", "nitro.envs.classic.acrobot:Acrobot")  # imported on first use
    assert type(nitro.make_env("Lazy-v0")).__name__ == "Acrobot"
    with pytest.raises(ValueError, match="already registered"):
        nitro.register("ShortCartPole-v0", CartPole)
