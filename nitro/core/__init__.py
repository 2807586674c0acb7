"""The env core: functional protocol (single- and multi-agent), auto-reset, spaces, random keys, registry and
fast path."""

from nitro.core.env import Env, Transition, autoreset_step
from nitro.core.registry import make, make_env, register, registered, spec
from nitro.core.spaces import Box, Discrete, MultiDiscrete
from nitro.core.vector import VecEnv

__all__ = ["Env", "Transition", "autoreset_step", "make", "make_env", "register", "registered", "spec",
           "Box", "Discrete", "MultiDiscrete", "VecEnv"]
