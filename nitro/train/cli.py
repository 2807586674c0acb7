"""``nitro train | eval | export``."""

from __future__ import annotations

import json


def add_commands(sub) -> None:
    """Register the training subcommands on the ``nitro`` parser."""
    p = sub.add_parser("train", help="train PPO: nitro train ENV_OR_PRESET [section.key=value ...]",
                       description="Train PPO. ENV is a preset (cartpole, pendulum, ...) or an env id; "
                                   "overrides look like ppo.lr=3e-4 env.num_envs=65536.")
    p.add_argument("env", nargs="?", help="preset name or env id (omit with --resume)")
    p.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. ppo.lr=3e-4")
    p.add_argument("--config", help="YAML file applied after the preset")
    p.add_argument("--resume", metavar="RUN", help="continue a run from its latest checkpoint")
    p.add_argument("--help-config", action="store_true", help="list every config key with its doc")
    p.set_defaults(fn=_train)

    p = sub.add_parser("eval", help="returns of a trained run over N episodes")
    p.add_argument("run", help="run directory")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--sample", action="store_true", help="sample actions (default: deterministic mode)")
    p.add_argument("--checkpoint", default="best", help="best | latest | a .safetensors path")
    p.add_argument("--device", default="auto")
    p.add_argument("--seed", type=int, default=12345)
    p.set_defaults(fn=_eval)

    p = sub.add_parser("export", help="export a run's policy: ONNX, or a Rocket League bot for RLBot v5")
    p.add_argument("run", help="run directory")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--onnx", action="store_true", help="export the policy to ONNX")
    target.add_argument("--rlbot", metavar="DIR", help="write an RLBot v5 bot folder (soccar runs; docs/RLBOT.md)")
    p.add_argument("--out", help="--onnx output path (default RUN/policy.onnx)")
    p.add_argument("--name", help="--rlbot: the bot's name (default: the run directory's name)")
    p.add_argument("--checkpoint", default="best")
    p.set_defaults(fn=_export)


def _train(args) -> int:
    from pathlib import Path

    import yaml

    from nitro.train import config as C
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
        trainer = Trainer(cfg, run_dir_for(cfg) if _is_main() else None)
    metrics = trainer.train()
    if trainer.dist.is_main:
        summary = {k: metrics[k] for k in ("global_step", "episode/return", "perf/sps") if k in metrics}
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
    if args.rlbot:
        from nitro.deploy.export import export_rlbot

        if args.out:
            raise ValueError("--out names the --onnx file; --rlbot DIR is the bot folder itself")
        path = export_rlbot(args.run, args.rlbot, args.checkpoint, args.name)
        print(f"wrote the RLBot v5 bot {path} (see {path / 'README.md'})")
        return 0
    if args.name:
        raise ValueError("--name names an --rlbot bot; --onnx writes a bare policy")
    from nitro.train.export import export_onnx

    path = export_onnx(args.run, args.out, args.checkpoint)
    print(f"wrote {path}")
    return 0
