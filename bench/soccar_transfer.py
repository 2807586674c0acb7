"""The transfer check: a soccar policy trained on nitro plays the scripted ball chaser in the real
RocketSim (the ``rocketsim`` binding, CPU) and its win rate there is set beside its win rate in nitro.

    python3 bench/soccar_transfer.py RUN --out DIR [--games 200] [--checkpoint latest] [--bot ball_chaser]
                                     [--seconds 300] [--max-overtime 120] [--nitro-json FILE | --nitro]
                                     [--seed 0]

RocketSim's games go through nitro's observation path (`nitro.adapters.rocketsim.play_games`: the
arenas read into a SoccarState, the run's observation builder, its action parser, tick skip and action
delay, a kickoff after each goal, GameCondition's end), the policy on blue in even games and orange in
odd ones, deterministic (its most likely action), as nitro eval plays it by default. nitro's side is read from an evaluation of the same
checkpoint against the same bot (``nitro eval RUN --vs ball_chaser``'s JSON: ``--nitro-json``, by
default RUN/eval/vs_bots_<checkpoint>.json when it is there), or played here with ``--nitro``
(evaluate_vs_bots on this machine's device: slow on a CPU). The target (issue 10): the RocketSim
win rate is at least 80 % of nitro's. Writes ``<out>/soccar_transfer.json`` and prints a table last.
Runs from the repository root; needs ``rocketsim`` (``pip install "nitro-rl[soccar]"``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from nitro.train.evaluate import Z95, checkpoint_path, evaluate_vs_bots, load_policy  # noqa: E402

TARGET = 0.8
"""The issue's bar: RocketSim's win rate over nitro's."""


def summarize(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% normal interval over games."""
    half = Z95 * float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return float(values.mean()), half


def rocketsim_games(run: str, which: str, bot: str, games: int, seconds: float, max_overtime: float | None,
                    seed: int) -> dict:
    import RocketSim as rs

    from nitro.adapters.rocketsim import play_games
    from nitro.envs.soccar import find_soccar_meshes

    try:
        rs.init(str(find_soccar_meshes().parent))
    except RuntimeError as error:  # a second init in one process
        if "Already inited" not in str(error):
            raise
    cfg, env, policy, rms = load_policy(run, which, "cpu", games=True)
    if bot not in env.bots():
        raise ValueError(f"{cfg.env.id} has no bot {bot!r}; its bots: {', '.join(env.bots())}")

    @torch.no_grad()
    def learner(state):
        obs = env.observe(state).float()
        logits = policy.dist.mask_logits(policy.actor(rms.normalize(obs) if rms else obs), env.action_mask(state))
        return policy.dist.to_env(policy.dist.mode(logits))

    scripted = env.bots()[bot]
    start = time.perf_counter()
    out = play_games(env, learner, lambda state: scripted(state, None), games, seconds, max_overtime, seed)
    wall = time.perf_counter() - start
    result = {"games": games, "wall_seconds": wall, "game_seconds": seconds, "max_overtime_seconds": max_overtime,
              "mean_game_ticks": float(out["ticks"].mean())}
    per_game = {"win_rate": out["outcome"], "wins": (out["outcome"] == 1).astype(float),
                "draws": (out["outcome"] == 0.5).astype(float), "losses": (out["outcome"] == 0).astype(float),
                "goals_for": out["goals_for"].astype(float), "goals_against": out["goals_against"].astype(float),
                "touches": out["touches"].astype(float)}
    for key, values in per_game.items():
        result[key], result[key + "_ci95"] = summarize(values)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a Soccar-v0 run directory")
    ap.add_argument("--out", required=True, help="folder for soccar_transfer.json")
    ap.add_argument("--games", type=int, default=200)
    ap.add_argument("--checkpoint", default="latest", help="best | latest | a .safetensors path")
    ap.add_argument("--bot", default="ball_chaser")
    ap.add_argument("--seconds", type=float, default=300.0, help="game length (s)")
    ap.add_argument("--max-overtime", type=float, default=120.0,
                    help="overtime limit (s), then a level game is a draw (120: as bench/soccar_learn_gpu.py plays)")
    ap.add_argument("--seed", type=int, default=0)
    side = ap.add_mutually_exclusive_group()
    side.add_argument("--nitro-json", help="nitro's side: an evaluate_vs_bots JSON of the same checkpoint and bot")
    side.add_argument("--nitro", action="store_true", help="play nitro's side here (evaluate_vs_bots)")
    ap.add_argument("--device", default="auto", help="--nitro: the device nitro's games run on")
    args = ap.parse_args()
    if args.games < 1:
        raise SystemExit(f"--games must be at least 1, got {args.games}")

    ckpt = checkpoint_path(args.run, args.checkpoint)
    params = {"termination": "game", "truncation": "none", "kickoff_after_goal": True}
    rocketsim = rocketsim_games(args.run, args.checkpoint, args.bot, args.games, args.seconds, args.max_overtime,
                                args.seed)
    nitro, source = None, None
    if args.nitro:
        from nitro.envs.soccar.rl.done_conditions import GameCondition

        game = GameCondition(args.seconds, args.max_overtime)
        nitro = evaluate_vs_bots(args.run, [args.bot], args.games, deterministic=True,
                                 checkpoint=args.checkpoint, device=args.device, seed=args.seed,
                                 env_params={**params, "termination": game})["opponents"][args.bot]
        source = "played here"
    else:
        path = Path(args.nitro_json) if args.nitro_json else Path(args.run) / "eval" / f"vs_bots_{ckpt.stem}.json"
        if path.exists():
            nitro = json.loads(path.read_text())["opponents"].get(args.bot)
            source = str(path)
    ratio = None
    if nitro is not None and nitro["win_rate"] > 0:
        ratio = rocketsim["win_rate"] / nitro["win_rate"]
    out = {
        "bench": "soccar_transfer", "run": str(args.run), "checkpoint": str(ckpt), "bot": args.bot,
        "deterministic": True, "seed": args.seed, "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__, "rocketsim": rocketsim, "nitro": nitro, "nitro_source": source,
        "rocketsim_over_nitro_win_rate": ratio, "target": TARGET,
        "kept_80_percent": None if ratio is None else ratio >= TARGET,
    }  # fmt: skip
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / "soccar_transfer.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")
    print(f"{'':<10} {'games':>6} {'win rate':>16} {'W / D / L':>20} {'goals for':>10} {'against':>8} {'touches':>8}")
    for name, r in (("rocketsim", rocketsim), ("nitro", nitro)):
        if r is None:
            print(f"{name:<10} (no evaluation: run nitro eval {args.run} --vs {args.bot}, or pass --nitro)")
            continue
        games = r.get("games", args.games)
        wdl = f"{r['wins']:.2f} / {r['draws']:.2f} / {r['losses']:.2f}"
        print(f"{name:<10} {games:>6} {r['win_rate']:>8.3f} +- {r['win_rate_ci95']:.3f} {wdl:>20} "
              f"{r['goals_for']:>10.2f} {r['goals_against']:>8.2f} {r['touches']:>8.1f}")
    if ratio is not None:
        print(f"RocketSim keeps {ratio:.1%} of nitro's win rate (target {TARGET:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
