"""Configuration: dotted overrides with type conversion, errors that say what is valid, presets,
``validate``, and the resolved config.yaml of a run round-tripping."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml
from train_helpers import tiny_config

from nitro.core.registry import spec
from nitro.train import config as C
from nitro.train.ppo import Trainer


def test_overrides_convert_to_field_types():
    cfg = C.load("cartpole", ["ppo.lr=3e-4", "env.num_envs=65_536", "ppo.total_steps=1e7",
                              "ppo.norm_adv=false", "ppo.obs_norm=True", "ppo.reward_scale=yes",
                              "policy.hidden=[32, 16]",
                              "ppo.target_return=none", "ppo.gamma=1", "run.name=123", "ppo.epochs=8"])
    assert cfg.ppo.lr == 3e-4 and type(cfg.ppo.lr) is float  # YAML 1.1 reads "3e-4" as a string
    assert cfg.env.num_envs == 65536 and type(cfg.env.num_envs) is int
    assert cfg.ppo.total_steps == 10_000_000 and type(cfg.ppo.total_steps) is int
    assert cfg.ppo.norm_adv is False and cfg.ppo.obs_norm is True and cfg.ppo.reward_scale is True
    assert cfg.policy.hidden == [32, 16]
    assert cfg.ppo.target_return is None
    assert cfg.ppo.gamma == 1.0 and type(cfg.ppo.gamma) is float
    assert cfg.run.name == "123"  # a str field keeps the text as written
    assert cfg.ppo.epochs == 8
    assert C.load("cartpole", ["ppo.target_return=450"]).ppo.target_return == 450.0


def test_env_params_keep_yaml_types():
    cfg = C.load("cartpole", ["env.params.max_episode_steps=100",
                              "env.params.kinematics_integrator=semi-implicit euler"])
    assert cfg.env.params == {"max_episode_steps": 100, "kinematics_integrator": "semi-implicit euler"}


def test_later_sources_win():
    # defaults <- preset <- overrides
    assert C.TrainConfig().env.num_envs == 4096
    assert C.load("cartpole").env.num_envs == 256
    assert C.load("cartpole", ["env.num_envs=64"]).env.num_envs == 64


def test_config_file_applies_after_preset(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("ppo:\n  lr: 1.0e-3\n  epochs: 2\n")
    cfg = C.load("cartpole", ["ppo.epochs=3"], str(path))
    assert cfg.ppo.lr == 1e-3 and cfg.ppo.epochs == 3 and cfg.env.num_envs == 256
    with pytest.raises(C.ConfigError, match="does not exist"):
        C.load("cartpole", [], str(tmp_path / "missing.yaml"))


def test_unknown_key_lists_the_valid_ones():
    with pytest.raises(C.ConfigError) as err:
        C.load("cartpole", ["ppo.lrr=3e-4"])
    msg = str(err.value)
    assert "'ppo.lrr'" in msg and "did you mean ppo.lr?" in msg
    for key in (f.name for f in dataclasses.fields(C.PPOConfig)):
        assert key in msg
    with pytest.raises(C.ConfigError, match="valid keys under the top level: curriculum, env, league, monitor, policy, ppo, run"):
        C.load("cartpole", ["trainer.lr=1"])
    with pytest.raises(C.ConfigError, match="unknown config key 'bogus'"):
        C.from_dict({"bogus": 1})


@pytest.mark.parametrize("override,match", [
    ("ppo.lr=abc", "ppo.lr: expected float, got 'abc'"),
    ("env.num_envs=2.5", "env.num_envs: expected int, got 2.5"),
    ("run.seed=true", "run.seed: expected int"),
    ("ppo.lr=true", "ppo.lr: expected float"),
    ("ppo.norm_adv=maybe", "ppo.norm_adv: expected bool, got 'maybe'"),
    ("policy.hidden=5", "policy.hidden: expected list, got 5"),
    ("ppo=3", "ppo is a section; give keys like ppo."),
    ("ppo.lr", "must look like section.key=value"),
])
def test_wrong_types_and_shapes_error(override, match):
    with pytest.raises(C.ConfigError, match=match.replace("(", r"\(").replace(")", r"\)")):
        C.load("cartpole", [override])


def test_unknown_env_lists_registered_ids():
    with pytest.raises(KeyError, match="Registered envs: .*CartPole-v1"):
        C.load("cartpol")


def test_env_id_without_a_preset():
    cfg = C.load("Acrobot-v1")
    assert cfg.env.id == "Acrobot-v1" and cfg.env.num_envs == C.EnvConfig().num_envs


@pytest.mark.parametrize("name", sorted(C.presets()))
def test_presets_load_and_name_registered_envs(name):
    raw = yaml.safe_load(C.presets()[name].read_text())
    raw.pop(C.ON_CUDA, None)  # applied on CUDA only (test_presets_sized_for_cuda_apply_only_on_cuda)
    cfg = C.load(name)
    assert spec(cfg.env.id).id == cfg.env.id
    # every key the preset sets is applied
    for section, values in raw.items():
        for key, value in values.items():
            got = getattr(getattr(cfg, section), key)
            assert got == value or got == type(got)(value), f"{section}.{key}"


def test_presets_include_cartpole_and_pendulum():
    assert {"cartpole", "pendulum"} <= set(C.presets())


@pytest.mark.parametrize("overrides,match", [
    (["env.num_envs=10", "ppo.num_steps=3", "ppo.minibatches=4"],
     "env.num_envs = 10 is not divisible by ppo.minibatches=4 (a minibatch is a set of whole env rollouts); "
     "use ppo.minibatches=2 or 5"),
    (["policy.lstm=8", "ppo.num_steps=20", "policy.bptt=8"], "policy.bptt=8 must divide ppo.num_steps=20"),
    (["policy.lstm=8", "env.num_envs=3", "ppo.num_steps=16", "policy.bptt=16", "ppo.minibatches=2"],
     "env.num_envs * (ppo.num_steps / policy.bptt) = 3 is not divisible by ppo.minibatches=2"),
    (["ppo.lr_schedule=cosine"], "ppo.lr_schedule='cosine'; choose one of linear, constant"),
    (["policy.activation=swish"], "policy.activation='swish'; choose one of"),
    (["run.precision=fp16"], "run.precision='fp16'; choose one of fp32, bf16"),
    (["run.graph=yes"], "run.graph="),
    (["env.num_envs=0", "ppo.minibatches=1"], "env.num_envs=0: must be an int >= 1"),
    (["ppo.gamma=1.5"], "ppo.gamma=1.5: must be in [0, 1]"),
    (["ppo.total_steps=1000"], "ppo.total_steps=1000 is less than one update (env.num_envs * ppo.num_steps = "
                               "8192); use ppo.total_steps=8192 or more"),
])
def test_validate_errors(overrides, match):
    with pytest.raises(C.ConfigError, match=re.escape(match)):
        C.load("cartpole", overrides)


def test_every_field_has_a_docstring():
    """The issue asks for a docstring per field; --help-config prints them."""
    undocumented = [key for key, _, doc in C.describe() if not doc]
    assert not undocumented, f"config fields without a docstring: {undocumented}"


def test_resolved_config_saved_with_the_run_round_trips(tmp_path):
    cfg = tiny_config("cartpole", "env.params.max_episode_steps=50", "policy.hidden=[16]", "ppo.lr=1e-3",
                      "ppo.total_steps=128")
    Trainer(cfg, tmp_path).train()
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["ppo"]["target_return"] is None and saved["env"]["params"] == {"max_episode_steps": 50}
    assert C.from_dict(saved) == cfg
    assert C.to_dict(C.from_dict(saved)) == saved


INVALID = {
    "env.id": "", "env.num_envs": -3, "env.params": "{bogus: 1}",
    "ppo.total_steps": -5, "ppo.num_steps": 0, "ppo.epochs": 0, "ppo.minibatches": 0, "ppo.lr": -1,
    "ppo.lr_schedule": "cosine", "ppo.adam_eps": 0, "ppo.gamma": -0.1, "ppo.gae_lambda": 2,
    "ppo.clip_coef": 0, "ppo.clip_vloss": "maybe", "ppo.vf_coef": -1, "ppo.ent_coef": "nan",
    "ppo.max_grad_norm": 0, "ppo.norm_adv": 2, "ppo.obs_norm": "x", "ppo.reward_scale": "x",
    "ppo.target_return": "inf", "ppo.target_episodes": 0,
    "policy.hidden": "[64, 0]", "policy.activation": "swish", "policy.layer_norm": "x", "policy.shared": "x",
    "policy.lstm": -1, "policy.bptt": 0, "policy.log_std": "learned", "policy.init_log_std": "inf",
    "policy.fused": "yes", "policy.heads": "{bid: [5, 2]}",
    "run.seed": 1.5, "run.device": "gpu", "run.precision": "fp16", "run.compile": "yes", "run.graph": "on",
    "run.threads": -1, "run.dir": "", "run.name": "a/b", "run.log_every": 0, "run.checkpoint_every": 0,
    "run.checkpoint_seconds": -1, "run.keep_last": 0, "run.tensorboard": "x", "run.console": "x",
    "league.pool_size": -1, "league.add_every": 0, "league.drop": "newest", "league.bots": "[nobody]",
    "league.mix": "{self: -1}", "league.matchmaking": "elo", "league.pfsp_power": -1, "league.score_decay": 1,
    "league.update_every": 0, "league.elo_k": 0, "league.rated_games": 0, "league.opponent_eval": "loop",
    "league.dense_reward": "nan", "league.outcome_reward": "inf", "curriculum.stages": "[{until: 'win >= x'}]",
    "monitor.replay_every": -1, "monitor.replay_envs": "[0, 99999]", "monitor.render": "unity",
}
"""One invalid value per config field (the issue's observed ones among them)."""


def test_every_field_has_an_invalid_value_here():
    assert set(INVALID) == {key for key, _, _ in C.describe()}


@pytest.mark.parametrize("key", sorted(INVALID))
def test_every_field_is_validated_up_front_in_one_line(key):
    value = INVALID[key]
    with pytest.raises((C.ConfigError, TypeError)) as err:
        cfg = C.load("cartpole", [f"{key}={value}"])
        C.resolve_device(cfg.run.device)  # devices are checked where a run starts
    msg = str(err.value)
    assert "\n" not in msg, msg
    assert key in msg or (key == "env.params" and "bogus" in msg), msg


def test_a_cuda_device_without_a_gpu_is_one_line(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(C.ConfigError, match=r"run.device='cuda' but PyTorch sees no CUDA GPU here .*use "
                                            r"run.device=cpu"):
        C.resolve_device("cuda")
    assert C.resolve_device("auto").type == "cpu"


def test_configs_built_in_python_are_type_checked():
    cfg = C.TrainConfig()
    cfg.ppo.epochs = 2.0
    with pytest.raises(C.ConfigError, match="ppo.epochs: expected int, got 2.0"):
        C.validate(cfg)
    cfg.ppo.epochs, cfg.ppo.lr = 2, "3e-4"
    with pytest.raises(C.ConfigError, match="ppo.lr: expected float, got '3e-4'"):
        C.validate(cfg)


def test_malformed_yaml_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("ppo:\n  lr: 3e-4\n  epochs: [4\nrun:\n  seed: 1\n")
    with pytest.raises(C.ConfigError) as err:
        C.load("cartpole", [], str(path))
    msg = str(err.value)
    assert msg.startswith(f"{path}:4:") and "invalid YAML" in msg and "\n" not in msg, msg
    path.write_text("- just\n- a list\n")
    with pytest.raises(C.ConfigError, match="must hold sections"):
        C.load("cartpole", [], str(path))
    with pytest.raises(C.ConfigError, match=r"policy.hidden='\[64' is not a valid value"):
        C.load("cartpole", ["policy.hidden=[64"])


def test_presets_sized_for_cuda_apply_only_on_cuda(monkeypatch):
    raw = yaml.safe_load(C.presets()["cartpole"].read_text())
    on_cuda = raw[C.ON_CUDA]
    assert C.load("cartpole").env.num_envs == raw["env"]["num_envs"]  # this machine has no GPU
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    cfg = C.load("cartpole")
    assert cfg.env.num_envs == on_cuda["env"]["num_envs"] and cfg.ppo.num_steps == on_cuda["ppo"]["num_steps"]
    # what the user says still wins, and run.device=cpu keeps the CPU sizes
    assert C.load("cartpole", ["env.num_envs=64"]).env.num_envs == 64
    assert C.load("cartpole", ["run.device=cpu"]).env.num_envs == raw["env"]["num_envs"]
