"""``nitro train | eval | league | tournament | export``."""

from __future__ import annotations

import argparse
import json
import textwrap
import time


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
    p.add_argument("--monitor", action="store_true",
                   help="open a live dashboard beside the run (a tmux pane inside tmux; else training goes to the "
                        "background and the dashboard takes this terminal)")
    p.set_defaults(fn=_train)

    p = sub.add_parser("eval", help="returns of a trained run over N episodes; multi-agent: its results against "
                                    "the env's bots",
                       description=textwrap.fill(
                           "Play a trained policy on fresh episodes and print the results as JSON. Single-agent "
                           "envs: returns over N episodes. Multi-agent envs: the policy on one team and a bot in "
                           "every other seat, N of the env's whole games per bot (soccar: 5 minutes): win rate, "
                           "wins, draws, losses, mean result, result margin and return, the env's episode "
                           "statistics (soccar: goals for and against, touches), with 95% confidence intervals; "
                           "RUN/eval/vs_bots.csv and vs_bots.png.", 78))
    p.add_argument("run", metavar="RUN", help="run directory (runs/<env>-<time>)")
    p.add_argument("--episodes", type=int, default=100,
                   help="episodes to play, in parallel (multi-agent: games per bot; default 100)")
    p.add_argument("--vs", nargs="*", metavar="BOT", help="multi-agent: the bots to play (default: every bot of the env)")
    p.add_argument("--params", nargs="*", default=[], metavar="KEY=VALUE",
                   help="env params to change, e.g. episode=game round_weights=none (whole Skull King games)")
    p.add_argument("--sample", action="store_true",
                   help="sample actions from the policy (default: its most likely action)")
    p.add_argument("--checkpoint", default="auto",
                   help="best (highest recent return), latest, or a .safetensors path (default auto: best, or "
                        "latest for multi-agent self-play runs)")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, default=12345, help="seed of the episodes (default 12345)")
    p.add_argument("--replay", action="store_true",
                   help="soccar envs: record --replay-envs into RUN/replays/eval_<checkpoint>.npz")
    p.add_argument("--replay-envs", type=int, nargs="+", default=[0], metavar="I",
                   help="env indices to record or render (default 0)")
    p.add_argument("--render", choices=["rlviser", "rocketsimvis"],
                   help="soccar envs: play the first of --replay-envs into a running viewer at game speed")
    p.add_argument("--no-write", action="store_true",
                   help="only print the result (default: also RUN/eval/eval.csv, the episodes and eval.png)")
    p.set_defaults(fn=_eval)

    p = sub.add_parser("league", help="a run's league: rating table and rating-over-time picture",
                       description="Print a run's league rating table and draw its ratings over time (the picture "
                                   "needs matplotlib: pip install \"nitro-rl[league]\").")
    p.add_argument("run", metavar="RUN", help="run directory of a training run with a league")
    p.add_argument("--png", metavar="FILE", help="where to write the picture (default RUN/league.png)")
    p.set_defaults(fn=_league)

    p = sub.add_parser("tournament", help="round robin of runs, checkpoints and bots on the device",
                       description="Every pair of players meets in N games (per seat order), all at once on "
                                   "the device; prints a Bradley-Terry Elo table with 95% bootstrap intervals.")
    p.add_argument("targets", nargs="*", metavar="RUN_OR_CHECKPOINT",
                   help="run directories (their latest checkpoint) or .safetensors checkpoints")
    p.add_argument("--games", type=int, default=256, help="games per ordered pair of players (default 256)")
    p.add_argument("--bots", nargs="*", default=[], metavar="BOT",
                   help="scripted players of the env, e.g. random tactical")
    p.add_argument("--pool", action="store_true", help="also the league snapshots stored in each checkpoint")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, default=0, help="seed of the games (default 0)")
    p.add_argument("--params", nargs="*", default=[], metavar="KEY=VALUE",
                   help="env params to change, e.g. episode=game round_weights=none (whole Skull King games)")
    p.add_argument("--out", metavar="FILE", help="also write the results as JSON here")
    p.set_defaults(fn=_tournament)

    p = sub.add_parser("export", help="export a run's policy: ONNX, or a Rocket League bot for RLBot v5",
                       description="Export a trained policy: to ONNX (observation in, action and value out; needs "
                                   "the export extra: pip install \"nitro-rl[export]\"), or as an RLBot v5 bot "
                                   "folder (soccar runs; docs/RLBOT.md).")
    p.add_argument("run", metavar="RUN", help="run directory (runs/<env>-<time>)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--onnx", action="store_true", help="export the policy to ONNX")
    target.add_argument("--rlbot", metavar="DIR", help="write an RLBot v5 bot folder (soccar runs; docs/RLBOT.md)")
    p.add_argument("--out", metavar="FILE", help="--onnx output path (default RUN/policy.onnx)")
    p.add_argument("--name", help="--rlbot: the bot's name (default: the run directory's name)")
    p.add_argument("--checkpoint", default="auto",
                   help="best (highest recent return), latest, or a .safetensors path (default auto: best; "
                        "--rlbot: latest for self-play runs)")
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
    started, t0 = time.time(), time.perf_counter()  # after Python, PyTorch and nitro are imported
    from pathlib import Path

    import yaml

    from nitro.monitor import beside, require
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
        run_dir = run_dir_for(cfg) if _is_main() else None
        if args.monitor:
            cfg.run.name = run_dir.name  # the dashboard watches this folder before the trainer fills it
            if not beside.in_tmux():
                train_args = [args.env, *args.overrides, *(["--config", args.config] if args.config else []),
                              f"run.dir={run_dir.parent}", f"run.name={run_dir.name}", "run.console=false"]
                return beside.watch_background(beside.train_in_background(train_args, run_dir), run_dir)
            beside.open_tmux_pane(run_dir)
        try:
            trainer = Trainer(cfg, run_dir)
        except BaseException:
            if run_dir:
                rundir.discard_if_unused(run_dir)  # a failed set-up leaves nothing behind
            raise
    t1 = time.perf_counter()
    metrics = trainer.train()
    t2 = time.perf_counter()
    if trainer.dist.is_main:
        print(f"nitro: {trainer.outcome}; run: {trainer.run_dir}", flush=True)
        keys = ("global_step", "episode/return_recent", "episode/recent_episodes", "target_reached", "perf/sps")
        summary = {k: metrics[k] for k in keys if k in metrics}
        # where the command's time went (bench/first_hour.py adds the imports before ``started`` and the
        # exit after ``printed``): set-up (config, device, env, policy, run directory), compile and graph
        # capture, the update loop, and the rest of train() (last checkpoint, closing the logs)
        phases = {"setup": t1 - t0, "capture": trainer.setup_seconds, "train": trainer.train_seconds,
                  "finish": t2 - t1 - trainer.setup_seconds - trainer.train_seconds}
        print(json.dumps({"run": str(trainer.run_dir), **summary, "phase_seconds": phases, "started": started,
                          "printed": time.time()}))
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


def _env_params(items: list[str]) -> dict:
    """``KEY=VALUE`` words as env params (values read as YAML: 3, true, none, [1, 2])."""
    from nitro.train.config import ConfigError, _yaml_value

    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--params takes KEY=VALUE words, e.g. episode=game; got {item!r}")
        key, value = item.split("=", 1)
        out[key] = None if value.lower() in ("none", "null") else _yaml_value(value, key)
    return out


def _eval(args) -> int:
    import sys
    from pathlib import Path

    import yaml

    from nitro.core.registry import make_env
    from nitro.monitor import evals
    from nitro.monitor.watch import EvalWatch
    from nitro.train.evaluate import checkpoint_path, evaluate, evaluate_vs_bots

    run = Path(args.run)
    config = run / "config.yaml"
    if not config.exists():
        raise FileNotFoundError(f"{args.run} is not a run directory (no config.yaml)")
    env_cfg = yaml.safe_load(config.read_text())["env"]
    params = _env_params(args.params)
    multi = make_env(env_cfg["id"], **{**env_cfg["params"], **params}).num_agents > 1
    which = ("latest" if multi else "best") if args.checkpoint == "auto" else args.checkpoint
    if multi:
        if args.replay or args.render:
            raise ValueError(f"--replay and --render play single-agent evaluations; {env_cfg['id']} is multi-agent "
                             f"(record its games in training with monitor.replay_every=N or monitor.render=...)")
        result = evaluate_vs_bots(args.run, args.vs, args.episodes, deterministic=not args.sample, checkpoint=which,
                                  device=args.device, seed=args.seed, env_params=params)
        print(json.dumps(result))
        if not args.no_write:
            files = evals.write_vs_bots(run, result)
            _eval_curve(run, [files["json"], files["table"]], "vs_bots_curve", evals.read_vs_bots)
        return 0
    bad = [i for i in args.replay_envs if not 0 <= i < args.episodes]
    if bad:
        raise ValueError(f"--replay-envs {bad} are not among the {args.episodes} evaluated envs (0..{args.episodes - 1})")
    watchers: list[EvalWatch] = []
    watch = None
    if args.replay or args.render:
        def watch(env, state):
            watchers.append(EvalWatch(env, state, args.replay_envs, args.render or "none",
                                      {"run": str(args.run), "checkpoint": which}))
            return watchers[0]
    result = evaluate(args.run, args.episodes, deterministic=not args.sample, checkpoint=which,
                      device=args.device, seed=args.seed, env_params=params, watch=watch)
    print(evals.dumps(result))
    if watchers:
        path = run / "replays" / f"eval_{checkpoint_path(run, which).stem}.npz" if args.replay else None
        watchers[0].finish(path)
        if path is not None:
            print(f"wrote {path}; view it with: nitro replay {path} --html replay.html", file=sys.stderr)
    if not args.no_write:
        files = evals.write(run, result)
        _eval_curve(run, [files["table"], files["episodes"].name], "eval_curve", evals.read)
    return 0


def _eval_curve(run, written: list, draw: str, read) -> None:
    """Draw the eval curve (``nitro.monitor.plot.<draw>`` of ``read(run)``) where matplotlib is installed,
    and say what was written."""
    import sys

    from nitro.monitor import require

    files = ", ".join(map(str, written))
    try:
        require("matplotlib", "the eval curve")
    except ValueError as missing:
        print(f"wrote {files}; {missing}", file=sys.stderr)
        return
    from nitro.monitor import plot

    curve = getattr(plot, draw)(run, read(run))
    print(f"wrote {files} and {curve.name}", file=sys.stderr)


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

    path = export_onnx(args.run, args.out, "best" if args.checkpoint == "auto" else args.checkpoint)
    print(f"wrote {path}")
    return 0


def _league(args) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from nitro.monitor.plots import rating_curve
    from nitro.train.league import summary

    info = summary(args.run)
    table = Table(title=f"league of {Path(args.run).name} at update {info['update']}")
    for col in ("rank", "player", "Elo", "OpenSkill (mu - 3 sigma)", "games", "joined at update",
                "learner's recent score"):
        table.add_column(col, justify="left" if col == "player" else "right")
    for i, r in enumerate(info["table"], 1):
        skill = "-" if r["openskill"] is None else f"{r['openskill']:.2f}"
        joined = "-" if r["joined"] is None else str(r["joined"])
        recent = "-" if r["recent_score"] is None else f"{r['recent_score']:.3f}"
        table.add_row(str(i), r["name"], f"{r['elo']:.0f}", skill, str(r["games"]), joined, recent)
    Console().print(table)
    if info["history"]:
        path = rating_curve(info["history"], args.png or Path(args.run) / "league.png", f"league of {Path(args.run).name}")
        print(f"wrote {path}")
    return 0


def _tournament(args) -> int:
    import torch
    from rich.console import Console
    from rich.table import Table

    from nitro.train.tournament import run

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    result = run(args.targets, args.games, args.bots, args.pool, _env_params(args.params), device=device,
                 seed=args.seed)
    table = Table(title=f"{result['env']}: {result['games']} games ({result['games_per_pair']} per ordered pair), "
                        f"{result['games_per_second']:.0f} games/s")
    for col in ("rank", "player", "Elo", "95% interval", "score", "95% interval", "W / D / L"):
        table.add_column(col, justify="left" if col == "player" else "right")
    for i, r in enumerate(result["table"], 1):
        table.add_row(str(i), r["name"], f"{r['elo']:+.0f}", f"[{r['elo_low']:+.0f}, {r['elo_high']:+.0f}]",
                      f"{r['score']:.3f}", f"[{r['score_low']:.3f}, {r['score_high']:.3f}]",
                      f"{r['wins']:.0f} / {r['draws']:.0f} / {r['losses']:.0f}")
    Console().print(table)
    if args.out:
        from pathlib import Path

        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0
