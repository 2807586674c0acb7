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

import nitro
from nitro.deploy import graph, runtime
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.rl import Soccar
from nitro.train.evaluate import load_policy

PAD_COOLDOWN_BIG, PAD_COOLDOWN_SMALL = 10.0, 4.0
"""Seconds until a taken pad is active again (RocketSim's RLConst::BoostPads::COOLDOWN_BIG / _SMALL)."""
TEMPLATES = ("bot.py", "bot.toml", "README.md", "requirements.txt")
"""Files of nitro/deploy/template written into the bot folder (``$name`` placeholders filled)."""
BOT_FILES = (*TEMPLATES, "nitro_runtime.py", "policy.onnx", "nitro.json")


def export_rlbot(run: str | Path, out: str | Path, which: str = "best", name: str | None = None) -> Path:
    """Write the bot folder ``out`` for checkpoint ``which`` (best | latest | a path) of ``run``."""
    cfg, env, policy, obs_rms = load_policy(run, which, "cpu")
    if not isinstance(env, Soccar):
        raise ValueError(f"--rlbot exports soccar runs; {run} trained {cfg.env.id}. Export it with --onnx instead")
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / "nitro.json").exists():
        raise ValueError(f"{out} exists and is not a nitro bot folder; give a new or empty folder for --rlbot")
    out.mkdir(parents=True, exist_ok=True)
    name = name or Path(run).resolve().name
    blue, orange = graph.car_slots(env)
    graph.export_graph(graph.PolicyGraph(env, policy, obs_rms, blue, orange), out / "policy.onnx")
    config = bot_config(env, policy, blue, orange)
    (out / "nitro.json").write_text(json.dumps(config, indent=1))
    shutil.copyfile(Path(runtime.__file__), out / "nitro_runtime.py")
    fields = template_fields(env, policy, obs_rms, name, Path(run), which, blue, orange)
    template = resources.files("nitro.deploy") / "template"
    for file in TEMPLATES:
        text = string.Template((template / file).read_text()).substitute(fields)
        (out / file).write_text(text)
    return out


def bot_config(env: Soccar, policy, blue: int, orange: int) -> dict:
    """nitro.json: what the runtime needs besides the graph."""
    p = env.params
    f32 = np.float32
    return {
        "slots": {"blue": blue, "orange": orange},
        "tick_skip": p.tick_skip,
        "action_delay": p.action_delay,
        "hidden_size": policy.cfg.lstm,
        "pads": [[*pos, i < len(C.BOOST_PADS_BIG)] for i, pos in enumerate(C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL)],
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


def template_fields(env: Soccar, policy, obs_rms, name: str, run: Path, which: str, blue: int, orange: int) -> dict:
    p = env.params
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "bot"
    cfg = policy.cfg
    core = f"an MLP {list(cfg.hidden)} ({cfg.activation})" + (f" with an LSTM of {cfg.lstm}" if cfg.lstm else "")
    delay = ("Trained without a delay, the bot acts one tick later than in training (RLBot's lag)."
             if p.action_delay == 0 else "")
    masked = getattr(p.action, "masks", False)
    return {
        "name": name, "agent_id": f"nitro/{slug}", "nitro_version": nitro.__version__, "run": str(run),
        "checkpoint": which, "teams": f"{p.blue}v{p.orange}", "max_blue": blue, "max_orange": orange,
        "tick_skip": p.tick_skip, "action_delay": p.action_delay, "delay_note": delay, "obs": repr(p.obs),
        "action": repr(p.action), "policy": core + (", observations normalized as in training" if obs_rms else ""),
        "mask_note": " among those its action mask allows" if masked else "",
        "lstm_note": ", a zero LSTM state" if cfg.lstm else "",
        "tags": '"1v1"' if max(p.blue, p.orange) == 1 else '"teamplay"',
    }
