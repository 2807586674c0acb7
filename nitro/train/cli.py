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
    p.add_argument("--monitor", action="store_true",
                   help="open a live dashboard beside the run (a tmux pane inside tmux; else training goes to the "
                        "background and the dashboard takes this terminal)")
    p.set_defaults(fn=_train)

    p = sub.add_parser("eval", help="returns of a trained run over N episodes")
    p.add_argument("run", help="run directory")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--sample", action="store_true", help="sample actions (default: deterministic mode)")
    p.add_argument("--checkpoint", default="best", help="best | latest | a .safetensors path")
    p.add_argument("--device", default="auto")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--replay", action="store_true",
                   help="soccar envs: record --replay-envs into RUN/replays/eval_<checkpoint>.npz")
    p.add_argument("--replay-envs", type=int, nargs="+", default=[0], metavar="I",
                   help="env indices to record or render (default 0)")
    p.add_argument("--render", choices=["rlviser", "rocketsimvis"],
                   help="soccar envs: play the first of --replay-envs into a running viewer at game speed")
    p.add_argument("--no-write", action="store_true",
                   help="only print the result (default: also RUN/eval/eval.csv, the episodes and eval.png)")
    p.set_defaults(fn=_eval)

    p = sub.add_parser("export", help="export a run's policy")
    p.add_argument("run", help="run directory")
    p.add_argument("--onnx", action="store_true", required=True, help="export to ONNX")
    p.add_argument("--out", help="output path (default RUN/policy.onnx)")
    p.add_argument("--checkpoint", default="best")
    p.set_defaults(fn=_export)


def _train(args) -> int:
    from pathlib import Path

    import yaml

    from nitro.monitor import beside, require
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
        if args.monitor:
            require("textual", "nitro train --monitor")
            if not beside.in_tmux():
                process = beside.train_in_background([*extra, "run.console=false", "--resume", str(run_dir)], run_dir)
                return beside.watch_background(process, run_dir)
            beside.open_tmux_pane(run_dir)
        trainer = Trainer(cfg, run_dir, resume=run_dir)
    else:
        if not args.env:
            raise ValueError("give an env or preset (nitro envs lists them), or --resume RUN")
        cfg = C.load(args.env, args.overrides, args.config)
        if args.monitor:
            require("textual", "nitro train --monitor")
            run_dir = run_dir_for(cfg)
            cfg.run.name = run_dir.name  # the dashboard watches this folder before the trainer makes it
            if not beside.in_tmux():
                train_args = [args.env, *args.overrides, *(["--config", args.config] if args.config else []),
                              f"run.dir={run_dir.parent}", f"run.name={run_dir.name}", "run.console=false"]
                return beside.watch_background(beside.train_in_background(train_args, run_dir), run_dir)
            beside.open_tmux_pane(run_dir)
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
    import sys
    from pathlib import Path

    from nitro.monitor import evals, require
    from nitro.monitor.watch import EvalWatch
    from nitro.train.evaluate import checkpoint_path, evaluate

    bad = [i for i in args.replay_envs if not 0 <= i < args.episodes]
    if bad:
        raise ValueError(f"--replay-envs {bad} are not among the {args.episodes} evaluated envs (0..{args.episodes - 1})")
    watchers: list[EvalWatch] = []
    watch = None
    if args.replay or args.render:
        def watch(env, state):
            watchers.append(EvalWatch(env, state, args.replay_envs, args.render or "none",
                                      {"run": str(args.run), "checkpoint": args.checkpoint}))
            return watchers[0]
    result = evaluate(args.run, args.episodes, deterministic=not args.sample, checkpoint=args.checkpoint,
                      device=args.device, seed=args.seed, watch=watch)
    print(evals.dumps(result))
    if watchers:
        path = Path(args.run) / "replays" / f"eval_{checkpoint_path(args.run, args.checkpoint).stem}.npz" \
            if args.replay else None
        watchers[0].finish(path)
        if path is not None:
            print(f"wrote {path}; view it with: nitro replay {path} --html replay.html", file=sys.stderr)
    if not args.no_write:
        files = evals.write(Path(args.run), result)
        try:
            require("matplotlib", "the eval curve (eval.png)")
        except ValueError as missing:
            print(f"wrote {files['table']} and {files['episodes'].name}; {missing}", file=sys.stderr)
            return 0
        from nitro.monitor import plot

        curve = plot.eval_curve(Path(args.run), evals.read(Path(args.run)))
        print(f"wrote {files['table']}, {files['episodes'].name} and {curve.name}", file=sys.stderr)
    return 0


def _export(args) -> int:
    from nitro.train.export import export_onnx

    path = export_onnx(args.run, args.out, args.checkpoint)
    print(f"wrote {path}")
    return 0
