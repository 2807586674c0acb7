"""``nitro export RUN --rlbot DIR``: a trained Soccar-v0 run as a ready RLBot v5 bot folder.

The folder holds ``bot.py`` (the `rlbot` Bot), ``nitro_runtime.py`` (this package's `runtime`: the
packet adapter, tick skip and action delay, onnxruntime), ``policy.onnx`` (`graph`: observation
builder, action mask, policy and action parser traced from the training code), ``nitro.json`` (team
slots, timing, pads and RocketSim constants), ``bot.toml``, ``README.md`` and ``requirements.txt``.
The bot needs numpy, onnxruntime and rlbot, not torch.
"""

from __future__ import annotations

import json
import re
import shutil
import string
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

import nitro
from nitro.core.registry import make_env
from nitro.deploy import graph, runtime
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.rl import Soccar
from nitro.envs.soccar.rl import common_values as V
from nitro.train.evaluate import load_policy

PAD_COOLDOWN_BIG, PAD_COOLDOWN_SMALL = 10.0, 4.0
"""Seconds until a taken pad is active again (RocketSim's RLConst::BoostPads::COOLDOWN_BIG / _SMALL)."""
TEMPLATES = ("bot.py", "bot.toml", "loadout.toml", "README.md", "requirements.txt")
"""Files of nitro/deploy/template written into the bot folder (``$name`` placeholders filled)."""
CAR_BODY_IDS = {"octane": 23, "dominus": 403, "plank": 803, "breakout": 22, "hybrid": 31, "merc": 30}
"""Rocket League's body id of a car with each RocketSim hitbox preset: Octane, Dominus, '16 Batmobile
(plank), Breakout, Venom (hybrid), Merc (BakkesMod's CARBODY ids)."""


def export_rlbot(run: str | Path, out: str | Path, which: str = "auto", name: str | None = None) -> Path:
    """Write the bot folder ``out`` for checkpoint ``which`` of ``run``: best | latest | a path, or auto
    (latest for multi-agent runs, whose self-play returns say nothing of strength; else best)."""
    run = Path(run)
    if not (run / "config.yaml").exists():
        raise FileNotFoundError(f"{run} is not a run directory (no config.yaml): give the folder nitro train wrote")
    env_cfg = yaml.safe_load((run / "config.yaml").read_text())["env"]
    trained = make_env(env_cfg["id"], **env_cfg.get("params", {}))
    if not isinstance(trained, Soccar):
        raise ValueError(f"--rlbot exports Rocket League (Soccar-v0) runs, and {run} trained {env_cfg['id']}: "
                         f"export it with --onnx instead")
    if which == "auto":
        which = "latest" if trained.num_agents > 1 else "best"
    _, env, policy, obs_rms = load_policy(run, which, "cpu")
    return write_bot(out, env, policy, obs_rms, name or run.resolve().name, f"the run `{run}` (checkpoint {which})")


def write_bot(out: str | Path, env: Soccar, policy, obs_rms, name: str, source: str) -> Path:
    """Write the bot folder ``out`` for ``policy`` (an `ActorCritic` on CPU) trained on ``env``, with
    the observation normalizer ``obs_rms`` (None if the run had none); ``source`` says where the policy
    comes from (README)."""
    out = Path(out)
    if not name or any(ch in name for ch in '"\\') or not name.isprintable():
        raise ValueError(f"the bot's name {name!r} must be non-empty, printable and without quotes or backslashes "
                         f"(it goes into bot.toml and bot.py): give another with --name")
    if out.exists() and any(out.iterdir()) and not (out / "nitro.json").exists():
        raise ValueError(f"{out} exists and is not a nitro bot folder; give a new or empty folder for --rlbot")
    out.mkdir(parents=True, exist_ok=True)
    blue, orange = graph.car_slots(env)
    graph.export_graph(graph.PolicyGraph(env, policy, obs_rms, blue, orange), out / "policy.onnx")
    (out / "nitro.json").write_text(json.dumps(bot_config(env, blue, orange, policy.cfg.lstm), indent=1))
    shutil.copyfile(Path(runtime.__file__), out / "nitro_runtime.py")
    fields = template_fields(env, policy, obs_rms, name, source, blue, orange)
    template = resources.files("nitro.deploy") / "template"
    for file in TEMPLATES:
        (out / file).write_text(string.Template((template / file).read_text()).substitute(fields))
    return out


def bot_config(env: Soccar, blue: int, orange: int, hidden_size: int = 0) -> dict:
    """nitro.json: what the runtime needs besides the graph (``hidden_size``: the policy's LSTM, 0 if none)."""
    p = env.params
    f32 = np.float32
    return {
        "slots": {"blue": blue, "orange": orange},
        "tick_skip": p.tick_skip,
        "action_delay": p.action_delay,
        "hidden_size": hidden_size,
        "pads": [[*pos, i < len(C.BOOST_PADS_BIG)] for i, pos in enumerate(V.PAD_POSITIONS)],
        "constants": {  # as nitro's car simulation computes with them (float32 sums where it sums)
            "tick_time": float(f32(1.0 / f32(C.DEFAULT_TICK_RATE))),
            "powerslide_rise_rate": C.POWERSLIDE_RISE_RATE,
            "powerslide_fall_rate": C.POWERSLIDE_FALL_RATE,
            "jump_min_time": C.JUMP_MIN_TIME,
            "jump_max_time": C.JUMP_MAX_TIME,
            "jump_reset_time": float(f32(C.JUMP_MIN_TIME)) + float(f32(C.JUMP_RESET_TIME_PAD)),
            "doublejump_max_delay": C.DOUBLEJUMP_MAX_DELAY,
            "boost_min_time": C.BOOST_MIN_TIME,
            "pad_cooldown_big": PAD_COOLDOWN_BIG,
            "pad_cooldown_small": PAD_COOLDOWN_SMALL,
        },
    }


def template_fields(env: Soccar, policy, obs_rms, name: str, source: str, blue: int, orange: int) -> dict:
    """The ``$name`` placeholders of the template files."""
    p = env.params
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "bot"
    cfg = policy.cfg
    core = f"an MLP {list(cfg.hidden)} ({cfg.activation})" + (f" with an LSTM of {cfg.lstm}" if cfg.lstm else "")
    timing = (f"the policy acts every {p.tick_skip} ticks (120 ticks per second); a new action takes effect "
              f"{p.action_delay} tick{'s' if p.action_delay != 1 else ''} after the packet it was decided on, as in "
              f"training (RLBot's own one-tick lag is the first of them)")
    if p.action_delay == 0:
        timing = (f"the policy acts every {p.tick_skip} ticks (120 ticks per second). It was trained without an "
                  f"action delay: here a new action takes effect one tick after its packet (RLBot's lag)")
    masked = getattr(p.action, "masks", False)
    cars = (p.car,) * (p.blue + p.orange) if isinstance(p.car, str) else tuple(p.car)
    blue_car, orange_car = cars[0] if p.blue else cars[-1], cars[-1] if p.orange else cars[0]
    return {
        "name": name, "agent_id": f"nitro/{slug}", "nitro_version": nitro.__version__, "source": source,
        "teams": f"{p.blue}v{p.orange}", "max_blue": blue, "max_orange": orange,
        "tick_skip": p.tick_skip, "timing": timing, "obs": repr(p.obs),
        "action": repr(p.action), "policy": core + (", observations normalized as in training" if obs_rms else ""),
        "mask_note": " among those its action mask allows" if masked else "",
        "lstm_note": ", a zero LSTM state" if cfg.lstm else "",
        "tags": '"1v1"' if max(p.blue, p.orange) == 1 else '"teamplay"',
        "car": f"{blue_car} for blue, {orange_car} for orange" if blue_car != orange_car else blue_car,
        "blue_car_id": CAR_BODY_IDS[blue_car], "orange_car_id": CAR_BODY_IDS[orange_car],
    }
