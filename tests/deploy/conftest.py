"""Fixtures of the RLBot export tests: one soccar run trained with ``nitro train``'s trainer and its
exported bot, bots of the other observation builders and action parsers, and one-threaded CPU runs."""

from __future__ import annotations

import contextlib

import pytest
import torch

pytest.importorskip("rlbot", reason="the RLBot v5 package (Python 3.11+, the test extra) builds the packets")

from deploy_helpers import Trained  # noqa: E402

from nitro.deploy.export import export_rlbot, write_bot  # noqa: E402
from nitro.envs.soccar.arena_mesh import MeshesNotFoundError, find_soccar_meshes  # noqa: E402
from nitro.envs.soccar.rl import Soccar, SoccarParams  # noqa: E402
from nitro.envs.soccar.rl.action_parsers import ContinuousAction, LookupTableAction  # noqa: E402
from nitro.envs.soccar.rl.obs_builders import DefaultObs, GigaLearnAdvancedObs, GigaLearnDefaultObs  # noqa: E402
from nitro.train import config as C  # noqa: E402
from nitro.train.config import PolicyConfig  # noqa: E402
from nitro.train.evaluate import load_policy  # noqa: E402
from nitro.train.optim import RunningMeanStd  # noqa: E402
from nitro.train.policy import ActorCritic  # noqa: E402
from nitro.train.ppo import Trainer  # noqa: E402

QUIET = ["run.console=false", "run.tensorboard=false", "run.device=cpu"]


@contextlib.contextmanager
def single_thread():
    """One intra-op thread: the tensors here are small, and when other processes share the cores,
    OpenMP's spinning threads slow small ops down by 10-100x."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="session")
def soccar_run(tmp_path_factory):
    """The ``soccar`` preset (Soccar-v0, 1v1 self-play, 256 x 3 MLP) trained for two updates of
    2 envs x 2 steps on the CPU: a real run directory with config and checkpoints."""
    try:
        find_soccar_meshes()
    except MeshesNotFoundError as error:  # the soccar extra is not installed
        pytest.skip(str(error))
    run_dir = tmp_path_factory.mktemp("soccar_run", numbered=False)
    cfg = C.load("soccar", [*QUIET, "env.num_envs=2", "ppo.num_steps=2", "ppo.total_steps=8", "ppo.minibatches=2"])
    with single_thread():  # session fixtures are set up before the per-test one_thread
        Trainer(cfg, run_dir).train()
    return run_dir


@pytest.fixture(scope="session")
def bots(soccar_run, tmp_path_factory) -> dict[str, Trained]:
    """Exported bots with the policies and envs they come from:

    - ``run``: the trained soccar run through ``nitro export RUN --rlbot DIR`` (RLGym's DefaultObs
      padded to 3v3, the lookup table, tick skip 8, the 1-tick delay);
    - ``advanced``: GigaLearn's AdvancedObs (with its pad-timer quirk) and action masks, normalized
      observations, tick skip 8 with GigaLearn's 7-tick delay;
    - ``lstm``: GigaLearn's DefaultObs and an LSTM policy, tick skip 4, a 2-tick delay;
    - ``continuous``: RLGym's DefaultObs without padding and continuous controls, tick skip 6, no delay.

    The last three are freshly initialized policies (export needs no training), seeded."""
    with single_thread():
        out = {}
        folder = tmp_path_factory.mktemp("bot_run")
        export_rlbot(soccar_run, folder)
        _, env, policy, obs_rms = load_policy(soccar_run, "latest")
        out["run"] = Trained(env, policy, obs_rms, folder)
        variants = {
            "advanced": ({"obs": GigaLearnAdvancedObs(), "action": LookupTableAction(masks=True), "action_delay": 7},
                         PolicyConfig(hidden=[64, 64], activation="relu"), True),
            "lstm": ({"obs": GigaLearnDefaultObs(), "tick_skip": 4, "action_delay": 2},
                     PolicyConfig(hidden=[64], lstm=32), False),
            "continuous": ({"obs": DefaultObs(zero_padding=None), "action": ContinuousAction(), "tick_skip": 6,
                            "action_delay": 0}, PolicyConfig(hidden=[64, 64]), False),
        }  # fmt: skip
        for seed, (name, (params, policy_cfg, normalized)) in enumerate(variants.items()):
            torch.manual_seed(seed)
            env = Soccar(SoccarParams(**params))
            policy = ActorCritic(env.observation_space.shape[0], env.action_space, policy_cfg).eval()
            obs_rms = None
            if normalized:
                obs_rms = RunningMeanStd(env.observation_space.shape, "cpu")
                obs_rms.mean.copy_(torch.randn(obs_rms.mean.shape) * 0.1)
                obs_rms.var.copy_(torch.rand(obs_rms.var.shape) + 0.5)
            folder = tmp_path_factory.mktemp(f"bot_{name}")
            write_bot(folder, env, policy, obs_rms, name, "a test")
            out[name] = Trained(env, policy, obs_rms, folder)
    return out
