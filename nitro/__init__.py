"""nitro: reinforcement learning with everything on the accelerator."""

from nitro.core import Box, Discrete, Env, MultiDiscrete, VecEnv, make, make_env, register, registered
import nitro.envs  # noqa: F401  (registers the built-in envs)

__version__ = "0.1.0"

__all__ = ["Box", "Discrete", "Env", "MultiDiscrete", "VecEnv", "make", "make_env", "register",
           "registered", "__version__"]
