"""``nitro train | eval | export``."""

from __future__ import annotations

import argparse
import json
import textwrap


def add_commands(sub) -> None:
    """Register the training subcommands on the ``nitro`` parser."""
    p = sub.add_parser("train", help="train PPO: nitro train ENV_OR_PRESET [section.key=value ...]",
                       description=textwrap.fill(
                           "Train PPO on an env. ENV is a preset (below) or any env id (nitro envs lists "
                           "them); overrides look like ppo.lr=3e-4 env.num_envs=65536 (nitro train "
                           "--help-config lists every key). The run goes to a new directory "
                           "runs/<env>-<time> (run.dir, run.name).", 78),
                       epilog=presets_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", nargs="?", metavar="ENV", help="preset name or env id (omit with --resume)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="dotted config overrides, e.g. ppo.lr=3e-4 env.num_envs=65536")
    p.add_argument("--config", metavar="FILE", help="YAML file of overrides applied after the preset")
    p.add_argument("--resume", metavar="RUN", help="continue the run in directory RUN from its newest readable "
                                                    "checkpoint (overrides such as ppo.total_steps=... apply)")
    p.add_argument("--help-config", action="store_true", help="list every config key with its default and doc")
    p.set_defaults(fn=_train)

    p = sub.add_parser("eval", help="returns of a trained run over N episodes",
                       description="Play a trained policy on fresh episodes and print its returns as JSON.")
    p.add_argument("run", metavar="RUN", help="run directory (runs/<env>-<time>)")
    p.add_argument("--episodes", type=int, default=100, help="episodes to play, in parallel (default 100)")
    p.add_argument("--sample", action="store_true",
                   help="sample actions from the policy (default: its most likely action)")
    p.add_argument("--checkpoint", default="best",
                   help="best (highest recent return), latest, or a .safetensors path (default best)")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, default=12345, help="seed of the episodes (default 12345)")
    p.set_defaults(fn=_eval)

    p = sub.add_parser("export", help="export a run's policy to ONNX",
                       description="Export a trained policy to ONNX: observation in, action and value out "
                                   "(needs the export extra: pip install \"nitro-rl[export]\").")
    p.add_argument("run", metavar="RUN", help="run directory (runs/<env>-<time>)")
    p.add_argument("--onnx", action="store_true", required=True, help="export to ONNX (the only format)")
    p.add_argument("--out", metavar="FILE", help="output path (default RUN/policy.onnx)")
    p.add_argument("--checkpoint", default="best",
                   help="best (highest recent return), latest, or a .safetensors path (default best)")
    p.set_defaults(fn=_export)


def presets_help() -> str:
    """The presets, one line each: name and the first line of the preset file's leading comment."""
    from nitro.train.config import presets

    lines = ["presets:"]
    for name, path in sorted(presets().items()):
        first = (path.read_text().splitlines() or [""])[0].lstrip("#").strip()
        lines.append(textwrap.fill(first, 78, initial_indent=f"  {name:<10} ", subsequent_indent=" " * 13))
    return "\n".join(lines)


def _train(args) -> int:
    from pathlib import Path

    import yaml

    from nitro.train import config as C
    from nitro.train import rundir
    from nitro.train.ppo import Trainer, run_dir_for

    if args.help_config:
        for key, default, doc in C.describe():
            print(f"{key:<24} {default:<14} {doc}")
        return 0
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").exists():
            raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
        cfg = C.from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
        extra = ([args.env] if args.env else []) + list(args.overrides)  # overrides only, e.g. ppo.total_steps=
        C.apply(cfg, _merged(extra))
        C.validate(cfg)
        trainer = Trainer(cfg, run_dir, resume=run_dir)
    else:
        if not args.env:
            raise ValueError("give an env or preset (nitro envs lists them), or --resume RUN")
        cfg = C.load(args.env, args.overrides, args.config)
        run_dir = run_dir_for(cfg) if _is_main() else None
        try:
            trainer = Trainer(cfg, run_dir)
        except BaseException:
            if run_dir:
                rundir.discard_if_unused(run_dir)  # a failed set-up leaves nothing behind
            raise
    metrics = trainer.train()
    if trainer.dist.is_main:
        print(f"nitro: {trainer.outcome}; run: {trainer.run_dir}", flush=True)
        keys = ("global_step", "episode/return_recent", "episode/recent_episodes", "target_reached", "perf/sps")
        summary = {k: metrics[k] for k in keys if k in metrics}
        print(json.dumps({"run": str(trainer.run_dir), **summary}))
    from nitro.train import dist

    trainer.graph = None  # release captured collectives before the process group goes away
    dist.barrier(trainer.dist)
    dist.shutdown(trainer.dist)
    return 0


def _is_main() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


def _merged(overrides: list[str]) -> dict:
    from nitro.train.config import merge, parse_override

    out: dict = {}
    for o in overrides:
        merge(out, parse_override(o))
    return out


def _eval(args) -> int:
    from nitro.train.evaluate import evaluate

    result = evaluate(args.run, args.episodes, deterministic=not args.sample, checkpoint=args.checkpoint,
                      device=args.device, seed=args.seed)
    print(json.dumps(result))
    return 0


def _export(args) -> int:
    from nitro.train.export import export_onnx

    path = export_onnx(args.run, args.out, args.checkpoint)
    print(f"wrote {path}")
    return 0
