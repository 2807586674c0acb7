"""1v1 soccar learned from scratch on one GPU with ``nitro train soccar``'s defaults, then measured
against the scripted ball chaser in 5-minute games: issue 10's learning target (a policy that beats
the ball chaser in >= 80 % of >= 200 five-minute games, within 15 minutes on one H100/H200).

    python3 bench/soccar_learn_gpu.py --out OUT [--budget 480] [--games 200] [--num-envs N]
                                      [--graph auto|true|false] [--curve-points 3] [--meshes DIR]
                                      [--set KEY=VALUE ...] [--device cpu --game-seconds S] (a dry run)

Stages, each written to ``OUT/soccar_learn_gpu.json`` as it ends:

1. checks: the scripted players on CUDA against the CPU (controls within 1e-5, the same lookup actions)
   and one Soccar-v0 step with their actions under ``torch.cuda.set_sync_debug_mode("error")``;
2. training: the ``soccar`` preset on CUDA (1v1 self-play, GigaLearn's example rewards, 256 x 3 ReLU,
   gamma 0.99, lambda 0.95, clip 0.2, tick skip 8, the fused physics kernel) for ``--budget`` seconds
   of wall time counted from the trainer's construction (env set-up and graph capture included), in
   OUT/run (metrics.jsonl, checkpoints every 60 s). ``--graph auto`` captures each PPO iteration in a
   CUDA graph and falls back to eager steps when that fails, then to the eager physics (each failure
   recorded);
3. the target: the last checkpoint against the ball chaser, ``--games`` 5-minute games (Soccar's
   GAME_PARAMS: kickoffs after goals, overtime until a goal, a draw after ``--overtime`` seconds more,
   default 120, which bounds the stage at 420 s of game time) on the GPU,
   the policy deterministic, on blue in even games and orange in odd ones (nitro eval's
   evaluate_vs_bots, its steps replayed from CUDA graphs);
4. the curve: up to ``--curve-points`` earlier checkpoints, each in ``--curve-games`` games of
   ``--curve-seconds`` against the ball chaser, while the ``--limit`` on the whole script allows.

The learning curve (training return, episode length and agent-steps/s per log, and the win rate at
each evaluated checkpoint against time) is in the JSON; OUT/run/eval/vs_bots.png draws it where
matplotlib is installed. OUT/run keeps the last checkpoint, cut to the policy and its normalizers, for
the transfer check in the real RocketSim (bench/soccar_transfer.py OUT/run, on a machine with
``rocketsim``). Runs from the repository root with no installs; prints a table last. ``--device cpu``
with a tiny budget, few arenas and short games dry-runs every stage but the CUDA checks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from nitro.core import rng, tree  # noqa: E402
from nitro.envs.soccar.rl.action_parsers import LookupTableAction  # noqa: E402
from nitro.envs.soccar.rl.bots import BOTS  # noqa: E402
from nitro.envs.soccar.rl.done_conditions import GameCondition  # noqa: E402
from nitro.envs.soccar.rl.env import Soccar, SoccarParams  # noqa: E402
from nitro.monitor import evals  # noqa: E402
from nitro.monitor.runs import read_metrics  # noqa: E402
from nitro.train import checkpoint  # noqa: E402
from nitro.train import config as C  # noqa: E402
from nitro.train.evaluate import evaluate_vs_bots  # noqa: E402
from nitro.train.ppo import Trainer  # noqa: E402
from tests.envs.soccar.rl.states import random_state  # noqa: E402

TARGET_WIN_RATE = 0.8
TARGET_MINUTES = 15


def checks(results: dict) -> None:
    """The bots on CUDA equal the CPU's; a Soccar-v0 step with their actions does not sync."""
    state = random_state(64, 1, 1, seed=4)
    parser = LookupTableAction()
    cuda = tree.to(state, "cuda")
    for name, bot in BOTS.items():
        diff = (bot(cuda).cpu() - bot(state)).abs().max().item()
        same = torch.equal(parser.encode(bot(cuda), cuda).cpu(), parser.encode(bot(state), state))
        results["checks"][f"{name}_max_abs_diff"], results["checks"][f"{name}_same_actions"] = diff, same
        assert diff <= 1e-5 and same, f"{name}: CUDA controls differ by {diff}, same actions: {same}"
    env = Soccar(SoccarParams())
    keys = rng.env_keys(rng.key(0, "cuda"), 64)
    s = env.reset(keys, 64, "cuda")
    play = env.bots()["ball_chaser"]
    env.step(s, play(s, keys), keys)  # warm-up: the constant tables
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        env.step(s, play(s, keys), keys)
        torch.cuda.synchronize()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    results["checks"]["step_with_bots_no_host_syncs"] = True


def train(args, out: Path, graph: bool, physics: str | None, results: dict) -> tuple[Path, dict]:
    """The soccar preset (its physics, or ``physics``) for ``args.budget`` seconds; returns the run
    directory and the last metrics."""
    run_dir = out / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    overrides = [f"run.dir={out}", "run.name=run", "run.console=false", "run.tensorboard=false",
                 f"run.graph={str(graph).lower()}", "run.checkpoint_seconds=60", "run.keep_last=20",
                 f"run.seed={args.seed}", f"run.device={args.device}"]
    if args.num_envs:
        overrides.append(f"env.num_envs={args.num_envs}")
    if physics:
        overrides.append(f"env.params.physics={physics}")
    overrides += args.set
    cfg = C.load("soccar", overrides)
    results["config"] = C.to_dict(cfg)
    curve = results["training"]["curve"] = []
    start = time.perf_counter()
    trainer = Trainer(cfg, run_dir)
    agents = trainer.env.num_agents

    def on_log(m: dict) -> None:
        elapsed = time.perf_counter() - start
        curve.append({"seconds": elapsed, "update": m["update"], "env_steps": m["global_step"],
                      "agent_steps": m["global_step"] * agents, "return": m.get("episode/return"),
                      "episode_length": m.get("episode/length"), "agent_steps_per_s": m["perf/sps"] * agents})
        if elapsed >= args.budget:
            trainer.num_updates = trainer.update  # the loop ends after this update

    metrics = trainer.train(on_log=on_log)
    trainer.save(metrics.get("episode/return"))
    wall = time.perf_counter() - start
    results["training"].update({
        "graph": graph, "physics": trainer.env.params.physics, "wall_seconds": wall, "setup_seconds": trainer.setup_seconds, "updates": trainer.update,
        "env_steps": trainer.global_step, "agent_steps": trainer.global_step * agents, "num_envs": trainer.N,
        "agents": agents, "agent_steps_per_s": trainer.global_step * agents / max(trainer.train_seconds, 1e-9),
        "final_return": metrics.get("episode/return"), "phases": {k: v for k, v in metrics.items() if k.startswith("perf/")},
    })  # fmt: skip
    return run_dir, metrics


def play(run_dir: Path, which: str, games: int, seconds: float, overtime: float, seed: int,
         device: str) -> tuple[dict, float]:
    """The checkpoint against the ball chaser in ``games`` games; (evaluate_vs_bots' result, wall seconds).
    On CUDA the steps replay from CUDA graphs, or run eagerly where capturing fails (noted)."""
    params = {"termination": GameCondition(seconds, overtime)}
    start = time.perf_counter()
    result = evaluate_vs_bots(run_dir, ["ball_chaser"], games, checkpoint=which, device=device, seed=seed,
                              env_params=params, graph="auto")
    if device == "cuda":
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def slim(path: Path) -> None:
    """Rewrite a checkpoint with the policy and its normalizers only (what load_policy reads): a few MB
    instead of the whole training state (optimizer, rollout carry)."""
    tensors, meta = checkpoint.load(path)
    checkpoint.save(path, {k: v for k, v in tensors.items() if k.startswith(("policy.", "obs_rms.", "ret_rms."))},
                    {**meta, "slim": "policy and normalizers only: evaluation and export, not resuming"})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=480.0, help="training wall-clock seconds (set-up included)")
    ap.add_argument("--games", type=int, default=200, help="5-minute games against the ball chaser (>= 200)")
    ap.add_argument("--num-envs", type=int, default=0, help="arenas (default: the preset's on CUDA, 4096)")
    ap.add_argument("--graph", choices=("auto", "true", "false"), default="auto",
                    help="capture each PPO iteration in a CUDA graph (auto: try, fall back to eager)")
    ap.add_argument("--curve-points", type=int, default=3, help="earlier checkpoints evaluated for the curve")
    ap.add_argument("--curve-games", type=int, default=64)
    ap.add_argument("--curve-seconds", type=float, default=60.0)
    ap.add_argument("--limit", type=float, default=540.0, help="seconds for the whole script; curve points stop")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--meshes", help="soccar collision meshes (default: $NITRO_MESHES or rlgym-rocket-league's)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="more config overrides, e.g. ppo.lr=1e-4")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--game-seconds", type=float, default=300.0, help="the target games' length (a dry run shortens it)")
    ap.add_argument("--overtime", type=float, default=120.0, help="overtime limit of the target games (s): then a draw")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("soccar_learn_gpu.py needs a CUDA device (--device cpu dry-runs it)")
    if args.meshes:
        os.environ["NITRO_MESHES"] = args.meshes
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "soccar_learn_gpu.json"
    results = {
        "bench": "soccar_learn_gpu", "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu",
        "triton": triton_version, "cuda": torch.version.cuda, "python": platform.python_version(),
        "budget_seconds": args.budget, "games": args.games, "game_seconds": args.game_seconds,
        "overtime_seconds": args.overtime, "target": {"win_rate": TARGET_WIN_RATE,
        "minutes": TARGET_MINUTES, "games": 200, "game_seconds": 300}, "checks": {}, "training": {},
        "errors": [], "curve_evals": [],
    }  # fmt: skip

    def save():
        path.write_text(json.dumps(results, indent=1, default=str))

    if args.device == "cuda":
        try:
            checks(results)
        except Exception:
            results["errors"].append({"stage": "checks", "error": traceback.format_exc()})
        save()

    attempts = [(graph, None) for graph in {"auto": [True, False], "true": [True], "false": [False]}[args.graph]]
    attempts.append((attempts[-1][0], "eager"))  # the PyTorch tick, should the fused kernel fail here
    run_dir = None
    for graph, physics in attempts:
        try:
            run_dir, _ = train(args, out, graph, physics, results)
            break
        except Exception:
            results["errors"].append({"stage": f"training (graph={graph}, physics={physics or 'preset'})",
                                      "error": traceback.format_exc()[-4000:]})
            save()
    save()
    if run_dir is None:
        print("training failed; see the errors in", path)
        return 1

    final = checkpoint.latest(run_dir)
    result, wall = play(run_dir, str(final), args.games, args.game_seconds, args.overtime, args.seed, args.device)
    results["target_eval"] = {**result["opponents"]["ball_chaser"], "wall_seconds": wall, "graph": result["graph"],
                              "update": result["update"], "env_steps": result["global_step"],
                              "graph_error": result.get("graph_error")}
    evals.write_vs_bots(run_dir, result)
    save()

    ckpts = [p for p in checkpoint.checkpoints(run_dir) if p != final]  # oldest first
    step = max(1, len(ckpts) // max(args.curve_points, 1))
    train_seconds = {row["update"]: row["perf/train_seconds"] for row in read_metrics(run_dir) if "perf/train_seconds" in row}
    for ckpt in ckpts[::step][-args.curve_points:] if args.curve_points else []:
        if time.perf_counter() - t0 > args.limit:
            results["curve_skipped"] = f"--limit {args.limit} s reached"
            break
        r, w = play(run_dir, str(ckpt), args.curve_games, args.curve_seconds, args.curve_seconds, args.seed + 1,
                    args.device)
        evals.write_vs_bots(run_dir, r)
        results["curve_evals"].append({"update": r["update"], "env_steps": r["global_step"],
                                       "train_seconds": train_seconds.get(r["update"]), "games": args.curve_games,
                                       "game_seconds": args.curve_seconds, "wall_seconds": w,
                                       **{k: v for k, v in r["opponents"]["ball_chaser"].items()}})
        save()
    try:
        from nitro.monitor import plot

        results["curve_png"] = str(plot.vs_bots_curve(run_dir, evals.read_vs_bots(run_dir)))
    except ImportError as missing:
        results["curve_png"] = f"not drawn: {missing}"
    for ckpt in [*ckpts, run_dir / "checkpoints" / "best.safetensors"]:  # the last one stays, for the transfer check
        ckpt.unlink(missing_ok=True)
    slim(final)
    t = results["target_eval"]
    minutes = (results["training"]["wall_seconds"]) / 60
    results["meets_target"] = bool(t["wins"] >= TARGET_WIN_RATE and minutes <= TARGET_MINUTES and args.games >= 200
                                   and args.game_seconds == 300)
    results["seconds"] = time.perf_counter() - t0
    save()

    tr = results["training"]
    print(f"wrote {path}")
    print(f"device {results['device']}  torch {results['torch']}  graph={tr['graph']}  physics={tr['physics']}  "
          f"envs {tr['num_envs']}")
    print(f"{'stage':<30} {'value':>20}")
    print(f"{'training wall (s)':<30} {tr['wall_seconds']:>20.1f}")
    print(f"{'agent steps':<30} {tr['agent_steps']:>20.3e}")
    print(f"{'agent-steps/s (training)':<30} {tr['agent_steps_per_s']:>20.3e}")
    print(f"{'final training return':<30} {tr['final_return'] if tr['final_return'] is not None else float('nan'):>20.3f}")
    for e in results["curve_evals"]:
        print(f"{'  win rate at ' + str(e['env_steps']) + ' steps':<30} {e['win_rate']:>12.3f} +- {e['win_rate_ci95']:.3f}")
    print(f"{'games vs ball chaser':<30} {args.games:>20d}")
    print(f"{'games won':<30} {t['wins']:>12.3f} +- {t['wins_ci95']:.3f}")
    print(f"{'win rate (draws half)':<30} {t['win_rate']:>12.3f} +- {t['win_rate_ci95']:.3f}")
    print(f"{'wins / draws / losses':<30} {t['wins']:>8.3f} / {t['draws']:.3f} / {t['losses']:.3f}")
    print(f"{'goals for / against':<30} {t['goals_for']:>12.2f} / {t['goals_against']:.2f}")
    print(f"{'touches per game':<30} {t['touches']:>20.1f}")
    print(f"{'eval wall (s)':<30} {t['wall_seconds']:>20.1f}")
    print(f"{'meets the target':<30} {str(results['meets_target']):>20}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
