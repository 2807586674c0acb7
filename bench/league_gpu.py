"""Multi-agent PPO and leagues on the GPU, on ConnectFour-v3.

    python3 bench/league_gpu.py throughput --out OUTDIR     # <= 4 min on an H200 (stops optional rows in time)
    python3 bench/league_gpu.py learn --out OUTDIR          # <= 4 min on an H200

throughput: checks first (the stacked opponents by batched matmul and by torch.func equal each policy run
alone; a league iteration makes no host sync; the captured league iteration equals the eager one), then
PPO env steps/s with the iteration captured in a CUDA graph and replayed (CUDA events after warm-up,
median of repeats), for: single-policy self-play (the learner drives both seats and learns from both),
a league of one snapshot driving the opponents' seats (the learner learns from its own seat only), and
a league of K = 8 stacked snapshots (all 8 slots filled, all games against the pool), its opponents
evaluated by one batched matmul per layer (bmm) or by torch.func.vmap; the opponent forward alone for
both methods; round-robin tournament games/s; and, while the time budget lasts, self-play and the K = 8
league with the rollout step and loss compiled. The claim checked: the K = 8 league (bmm, the default)
keeps >= 70% of self-play's env steps/s at every size.

learn: trains with a league (8 snapshots, the random and tactical bots as fixed members, PFSP) for a
fixed wall-clock budget, keeping copies of the policy at updates 20 and 100, then plays a round robin of
the final policy, those early copies, the pool and both bots and records the table (Bradley-Terry Elo
with 95% bootstrap intervals), the score against the tactical bot with its Wilson interval, and how often
the policy's most likely move is a best move of the 300 solver-valued positions of tests/envs/data (the
tactical bot: 0.91). The claims checked: the final policy scores >= 0.60 against the tactical bot (2,048
games, its 95% interval above 0.5), and rates >= 400 Elo (an expected score of 0.91) above its copy at
update 20 with the two intervals apart. The league's rating history is in the JSON (``history``, the
rating curve's data, drawn as OUTDIR/connect_four_league.png where matplotlib is installed), and the run
directory is in OUTDIR/run: ``nitro league OUTDIR/run`` prints the league table and draws the curve.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nitro import bench as env_bench  # noqa: E402
from nitro.core import rng  # noqa: E402
from nitro.core.spaces import Discrete  # noqa: E402
from nitro.envs.connect_four import ConnectFour  # noqa: E402
from nitro.train import tournament as tour  # noqa: E402
from nitro.monitor.plots import rating_curve  # noqa: E402
from nitro.train.config import PolicyConfig, load  # noqa: E402
from nitro.train.league import read_history  # noqa: E402
from nitro.train.opponents import PolicyStack  # noqa: E402
from nitro.train.policy import ActorCritic  # noqa: E402
from nitro.train.ppo import Trainer  # noqa: E402

QUIET = ["run.console=false", "run.tensorboard=false"]
HIDDEN = "[256, 256]"
K = 8


def _time(fn, repeats: int, device) -> float:
    timed = env_bench._timer(device)
    return statistics.median(timed(fn) for _ in range(repeats))


def _trainer(num_envs: int, extra: list[str], device: str, run_dir: Path | None = None) -> Trainer:
    graph = "true" if device == "cuda" else "false"
    cfg = load("ConnectFour-v3", QUIET + [f"run.device={device}", f"env.num_envs={num_envs}", "ppo.num_steps=16",
                                          "ppo.epochs=4", "ppo.minibatches=4", "ppo.total_steps=100_000_000_000",
                                          f"policy.hidden={HIDDEN}", "run.compile=false", f"run.graph={graph}",
                                          "run.precision=bf16" if device == "cuda" else "run.precision=fp32",
                                          *extra])
    return Trainer(cfg, run_dir)


# ---------------------------------------------------------------------------------------------- checks
def check_stack(device: str, rows: int) -> dict:
    """bmm and vmap against each policy alone (fp32: only summation order differs)."""
    torch.manual_seed(0)
    policies = [ActorCritic(84, Discrete(7), PolicyConfig(hidden=[256, 256])).to(device) for _ in range(K)]
    obs = torch.rand(rows, 84, device=device).round()
    out = {}
    for method in ("bmm", "vmap"):
        stack = PolicyStack(policies[0], K, 84, obs_norm=False, method=method)
        for k, p in enumerate(policies):
            stack.load_(k, p.state_dict())
        with torch.no_grad():
            got = stack.outputs(obs)
            out[f"{method}_max_abs_diff"] = max((got[k] - p.actor(obs)).abs().max().item() for k, p in enumerate(policies))
    out["ok"] = max(out.values()) < 1e-4  # fp32 sums of 256 products in another order: ~1e-6
    return out


def check_no_sync(device: str) -> dict:
    tr = _trainer(1024, [f"league.pool_size={K}", "league.bots=[random,tactical]", "run.graph=false"], device)
    tr.iteration()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        tr.iteration()
        ok, err = True, ""
    except RuntimeError as e:
        ok, err = False, str(e)[:300]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return {"ok": ok, "error": err}


def check_graph_equals_eager(device: str) -> dict:
    extra = [f"league.pool_size={K}", "league.bots=[random,tactical]", "run.precision=fp32"]
    trainers = []
    for graph in ("true", "false"):
        tr = _trainer(2048, extra + [f"run.graph={graph}"], device)
        if tr.graphed:
            tr._capture()
        for _ in range(3):
            tr.graph.replay() if tr.graphed else tr.iteration()
        trainers.append(tr)
    g, e = trainers
    torch.cuda.synchronize()
    diff = (g.opt.flat - e.opt.flat).abs().max().item()
    same_games = torch.equal(g.outcomes, e.outcomes) and torch.equal(g.carry.opponent, e.carry.opponent)
    return {"param_max_abs_diff": diff, "same_games": same_games, "ok": diff < 1e-5 and same_games}


# ---------------------------------------------------------------------------------------------- throughput
def _fill_pool(tr: Trainer) -> None:
    """Snapshots of the learner in every empty pool slot (the compute is the same either way; the games
    then spread over all K)."""
    for update in range(1, tr.stack.k):
        tr.stack.load_(tr.league.add_snapshot(update), tr.policy.state_dict(), tr.obs_rms.mean, tr.obs_rms.var)
    tr._matchmaking()


def ppo_sps(num_envs: int, name: str, extra: list[str], device: str, repeats: int) -> dict:
    t0 = time.perf_counter()
    tr = _trainer(num_envs, extra, device)
    if tr.stack is not None:
        _fill_pool(tr)
    if tr.graphed:
        tr._capture()
        step = tr.graph.replay
    else:
        tr.iteration()
        step = tr.iteration
    setup = time.perf_counter() - t0
    t_iter = _time(step, repeats, tr.device)
    return {"config": name, "num_envs": num_envs, "learner_rows": tr.L, "overrides": " ".join(extra),
            "setup_s": setup, "iteration_s": t_iter, "env_sps": num_envs * tr.T / t_iter,
            "learner_samples_per_s": tr.L * tr.T / t_iter}


def opponent_forward(rows: int, device: str, repeats: int) -> list[dict]:
    torch.manual_seed(0)
    policy = ActorCritic(84, Discrete(7), PolicyConfig(hidden=[256, 256])).to(device)
    obs = torch.rand(rows, 84, device=device).round()
    out = []
    for method in ("bmm", "vmap"):
        stack = PolicyStack(policy, K, 84, obs_norm=True, method=method)
        with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                                              enabled=device == "cuda"):
            def fwd(stack=stack):
                stack.select(stack.outputs(obs), torch.zeros(rows, dtype=torch.int64, device=device))
            for _ in range(3):
                fwd()
            t = _time(fwd, repeats, torch.device(device))
        out.append({"method": method, "rows": rows, "k": K, "seconds": t, "rows_per_s": rows / t})
    with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=device == "cuda"):
        t = _time(lambda: policy.actor(obs), repeats, torch.device(device))
    out.append({"method": "one policy", "rows": rows, "k": 1, "seconds": t, "rows_per_s": rows / t})
    return out


def tournament_games(games: int, device: str) -> dict:
    env = ConnectFour()
    torch.manual_seed(0)
    players = [tour.Player(f"policy{i}", ActorCritic(84, Discrete(7), PolicyConfig(hidden=[256, 256])).state_dict(),
                           PolicyConfig(hidden=[256, 256])) for i in range(4)]
    players += [tour.Player("bot:random", bot=env.random_bot), tour.Player("bot:tactical", bot=env.tactical_bot)]
    tour.play(env, players, 16, device)  # warm-up
    torch.cuda.synchronize() if device == "cuda" else None
    t0 = time.perf_counter()
    results = tour.play(env, players, games, device, seed=1)
    seconds = time.perf_counter() - t0
    total = int(results.sum())
    return {"players": len(players), "games_per_ordered_pair": games, "games": total, "seconds": seconds,
            "games_per_s": total / seconds}


CLAIM_RATIO = 0.70
"""The K = 8 league (bmm) keeps at least this share of single-policy self-play's env steps/s."""


def _measure(rec: dict, save, n: int, name: str, extra: list[str], args, base: str = "self-play") -> None:
    """One row of ``rec["ppo"]``, with its env steps/s relative to the ``base`` row of the same size."""
    try:
        r = ppo_sps(n, name, extra, args.device, args.repeats)
    except Exception as e:  # noqa: BLE001 - keep the other measurements
        r = {"config": name, "num_envs": n, "error": repr(e)[:500]}
    rec["ppo"].append(r)
    print(json.dumps(r), flush=True)
    base = next((b for b in rec["ppo"] if b["config"] == base and b["num_envs"] == n and "env_sps" in b), None)
    if base and "env_sps" in r:
        r["env_sps_vs_self_play"] = r["env_sps"] / base["env_sps"]
    save()


def throughput(args, rec: dict, save) -> None:
    """Fills ``rec`` (and ``save()``s it after each measurement: a run cut short keeps what it measured)."""
    start = time.perf_counter()
    dev = args.device
    rec.update({"checks": {}, "ppo": [], "opponent_forward": [], "tournament": None, "budget_s": args.budget})
    rec["checks"]["stack"] = check_stack(dev, 4096)
    if dev == "cuda":
        rec["checks"]["no_sync"] = check_no_sync(dev)
        rec["checks"]["graph_equals_eager"] = check_graph_equals_eager(dev)
    save()
    pool = [f"league.pool_size={K}", "league.mix={pool: 1.0}"]
    configs = [("self-play", []),
               ("league K=1", ["league.pool_size=1", "league.mix={pool: 1.0}"]),
               (f"league K={K} bmm", [*pool, "league.opponent_eval=bmm"]),
               (f"league K={K} vmap", [*pool, "league.opponent_eval=vmap"]),
               (f"league K={K} bmm + self + bots", [f"league.pool_size={K}", "league.bots=[random,tactical]",
                                                    "league.mix={self: 0.3, pool: 0.5, tactical: 0.2}"])]
    for n in args.num_envs:
        for name, extra in configs:
            _measure(rec, save, n, name, extra, args)
    rec["claim"] = claim(rec["ppo"], f"league K={K} bmm")
    for rows in args.forward_rows:
        rec["opponent_forward"] += opponent_forward(rows, dev, args.repeats)
    save()
    rec["tournament"] = tournament_games(args.games, dev)
    save()
    # optional: compiled rollout step and loss (run.compile=true, the CUDA default of nitro train), while
    # the budget lasts (each row compiles for a while first)
    n = max(args.num_envs)
    for name, extra in (("self-play, compiled", []), (f"league K={K} bmm, compiled", pool)):
        if time.perf_counter() - start > args.budget - args.compile_reserve:
            rec["ppo"].append({"config": name, "num_envs": n, "error": "skipped: out of time"})
            continue
        _measure(rec, save, n, name, [*extra, "run.compile=true"], args, base="self-play, compiled")
    rec["claim_compiled"] = claim(rec["ppo"], f"league K={K} bmm, compiled")


def claim(rows: list[dict], config: str) -> dict:
    """Whether ``config`` keeps CLAIM_RATIO of self-play's env steps/s at every size measured."""
    ratios = {r["num_envs"]: r["env_sps_vs_self_play"] for r in rows
              if r["config"] == config and "env_sps_vs_self_play" in r}
    return {"config": config, "ratio_by_num_envs": ratios, "required": CLAIM_RATIO,
            "ok": bool(ratios) and min(ratios.values()) >= CLAIM_RATIO}


def print_throughput(rec: dict) -> None:
    print("\nchecks: " + ", ".join(f"{k} {'ok' if v['ok'] else 'FAILED'}" for k, v in rec["checks"].items()))
    print(f"\n{'config':34s} {'envs':>8s} {'env steps/s':>13s} {'learner samples/s':>18s} {'vs self-play':>12s}")
    for r in rec["ppo"]:
        if "env_sps" in r:
            print(f"{r['config']:34s} {r['num_envs']:8d} {r['env_sps']:13.3e} {r['learner_samples_per_s']:18.3e} "
                  f"{r.get('env_sps_vs_self_play', float('nan')):12.2f}")
        else:
            print(f"{r['config']:34s} {r['num_envs']:8d} error: {r['error'][:60]}")
    print(f"\n{'opponent forward':16s} {'rows':>8s} {'K':>3s} {'ms':>8s}")
    for r in rec["opponent_forward"]:
        print(f"{r['method']:16s} {r['rows']:8d} {r['k']:3d} {1e3 * r['seconds']:8.3f}")
    t = rec["tournament"]
    print(f"\ntournament: {t['games']} games of {t['players']} players in {t['seconds']:.2f} s = "
          f"{t['games_per_s']:.3e} games/s")
    for key in ("claim", "claim_compiled"):
        c = rec.get(key)
        if c:
            ratios = ", ".join(f"{n}: {v:.2f}" for n, v in c["ratio_by_num_envs"].items()) or "not measured"
            print(f"claim: {c['config']} keeps >= {c['required']:.0%} of self-play's env steps/s ({ratios}): "
                  f"{'ok' if c['ok'] else 'NOT MET'}")


# ---------------------------------------------------------------------------------------------- learning
class OutOfTime(Exception):
    pass


EARLY = (20, 100)
"""Updates at which a copy of the policy is kept for the final round robin."""
BEATS_TACTICAL = 0.60
"""The final policy's score (wins + draws / 2) against the tactical bot, over 2 x --games games."""
BEATS_EARLY = 400.0
"""Elo of the final policy above its copy at update EARLY[0] (an expected score of 0.91)."""


def _copy(tr: Trainer, name: str) -> tour.Player:
    norm = tr.cfg.ppo.obs_norm
    return tour.Player(name, {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}, tr.cfg.policy,
                       tr.obs_rms.mean.clone() if norm else None, tr.obs_rms.var.clone() if norm else None)


def learn(args, rec: dict, save) -> None:
    dev = args.device
    run_dir = Path(args.out) / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    extra = [f"env.num_envs={args.learn_envs}", f"league.pool_size={K}", "league.bots=[random,tactical]",
             "league.mix={self: 0.3, pool: 0.7}", "league.matchmaking=pfsp", "league.update_every=20",
             "league.add_every=200", "league.rated_games=256", "ppo.lr=3e-4", "ppo.lr_schedule=constant",
             "ppo.ent_coef=0.01", "env.params.opening_moves=0", "run.log_every=20", "run.checkpoint_every=1000000",
             "run.checkpoint_seconds=0", "run.keep_last=1"]
    rec["overrides"] = extra
    tr = _trainer(args.learn_envs, extra, dev, run_dir)
    start = time.perf_counter()
    curve, early = [], []

    def on_log(m):
        curve.append({k: m[k] for k in ("update", "global_step", "perf/sps", "episode/return", "league/elo",
                                        "league/win_rate", "league/win_rate/tactical", "league/win_rate/random")
                      if k in m})
        if m["update"] in EARLY:
            early.append(_copy(tr, f"early@{m['update']}"))
        if time.perf_counter() - start > args.seconds:
            raise OutOfTime

    try:
        tr.train(on_log=on_log)
    except OutOfTime:
        pass
    train_s = time.perf_counter() - start
    tr.save(None)
    rec.update({"train_seconds": train_s, "updates": tr.update, "env_steps": tr.global_step,
                "env_sps": tr.global_step / train_s, "curve": curve, "best_move_rate": best_move_rate(tr, dev)})
    save()
    env = ConnectFour()
    _, players = tour.checkpoint_players(run_dir, pool=True, device=dev)
    players += [*early, tour.Player("bot:random", bot=env.random_bot),
                tour.Player("bot:tactical", bot=env.tactical_bot)]
    names = [p.name for p in players]
    t0 = time.perf_counter()
    results = tour.play(env, players, args.games, dev, seed=7)
    table = tour.table(names, results)
    rec.update({"tournament_seconds": time.perf_counter() - t0, "table": table, "results": results.tolist(),
                "players": names})
    final, tactical = 0, names.index("bot:tactical")
    w, d, l = results[final, tactical] + results[tactical, final][::-1]
    score = (w + 0.5 * d) / (w + d + l)
    low, high = tour.wilson(w + 0.5 * d, w + d + l)
    rec["final_vs_tactical"] = {"wins": w, "draws": d, "losses": l, "score": score, "score_low": low,
                                "score_high": high, "required": BEATS_TACTICAL,
                                "ok": bool(score >= BEATS_TACTICAL and low > 0.5)}
    rows = {r["name"]: r for r in table}
    first = f"early@{EARLY[0]}"
    if first in rows:
        mine, theirs = rows[names[final]], rows[first]
        rec["final_vs_early"] = {"early": first, "elo_gap": mine["elo"] - theirs["elo"], "required": BEATS_EARLY,
                                 "ok": bool(mine["elo"] - theirs["elo"] >= BEATS_EARLY and
                                            mine["elo_low"] > theirs["elo_high"])}
    save()
    rec["history"] = read_history(run_dir)  # the league's ratings per league step: the rating curve's data
    save()
    try:
        rating_curve(rec["history"], Path(args.out) / "connect_four_league.png", "ConnectFour-v3 league")
    except ImportError as e:  # no matplotlib on this machine: draw it later from the JSON's history
        rec["picture"] = str(e)


POSITIONS = Path(__file__).resolve().parents[1] / "tests" / "envs" / "data" / "connect_four_positions.txt"


def best_move_rate(tr: Trainer, device: str) -> dict:
    """How often the final policy's most likely move (and the tactical bot's) is one of the best moves of
    the 300 solver-valued positions (tests/envs/data); on this set the tactical bot scores 0.91 and a
    uniformly random player 0.30 (tests/envs/test_connect_four.py)."""
    lines = [line.split() for line in POSITIONS.read_text().splitlines() if line.strip()]
    values = torch.tensor([[-2 if v == "x" else int(v) for v in cols] for _, *cols in lines], device=device)
    env = ConnectFour()
    state = env.from_moves([m for m, *_ in lines], device=device)
    best = values.max(1).values
    with torch.no_grad():
        obs = tr._normalize(env.observe(state).float())
        out = tr.dist_head.mask_logits(tr.policy.actor(obs).float(), env.action_mask(state))
    moves = {"policy": out.argmax(-1), "tactical": env.tactical_bot(state, rng.env_keys(rng.key(5, device), len(lines)))}
    rates = {}
    for name, rows in moves.items():
        column = rows.view(-1, 2).gather(1, state.to_move[:, None]).squeeze(1)
        rates[name] = (values.gather(1, column[:, None]).squeeze(1) == best).float().mean().item()
    return rates


def print_learn(rec: dict) -> None:
    print(f"\ntrained {rec['updates']} updates, {rec['env_steps']:.3e} env steps in {rec['train_seconds']:.0f} s "
          f"({rec['env_sps']:.3e} env steps/s incl. league steps and logs)")
    print(f"\n{'player':28s} {'Elo':>7s} {'95% interval':>16s} {'score':>7s}")
    for r in rec["table"]:
        print(f"{r['name']:28s} {r['elo']:+7.0f} [{r['elo_low']:+6.0f}, {r['elo_high']:+6.0f}] {r['score']:7.3f}")
    b = rec["best_move_rate"]
    print(f"\nbest move on the 300 solver-valued positions: policy {b['policy']:.3f}, tactical bot {b['tactical']:.3f}")
    v = rec["final_vs_tactical"]
    print(f"final policy vs tactical bot: {v['wins']:.0f} W / {v['draws']:.0f} D / {v['losses']:.0f} L, score "
          f"{v['score']:.3f} [{v['score_low']:.3f}, {v['score_high']:.3f}]")
    print(f"claim: scores >= {v['required']:.2f} against the tactical bot, interval above 0.5: "
          f"{'ok' if v['ok'] else 'NOT MET'}")
    e = rec.get("final_vs_early")
    if e:
        print(f"claim: rates >= {e['required']:.0f} Elo above {e['early']} (measured {e['elo_gap']:+.0f}), intervals "
              f"apart: {'ok' if e['ok'] else 'NOT MET'}")


def _triton_version(device: str) -> str | None:
    if device != "cuda":
        return None
    import triton  # CUDA builds of PyTorch ship it

    return triton.__version__


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["throughput", "learn"])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--num-envs", type=int, nargs="+", default=[16384, 65536])
    ap.add_argument("--forward-rows", type=int, nargs="+", default=[65536])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--games", type=int, default=1024, help="tournament games per ordered pair")
    ap.add_argument("--learn-envs", type=int, default=16384)
    ap.add_argument("--seconds", type=float, default=170.0, help="learn: training wall-clock budget")
    ap.add_argument("--budget", type=float, default=225.0,
                    help="throughput: seconds after which optional rows (compiled) are skipped")
    ap.add_argument("--compile-reserve", type=float, default=90.0,
                    help="throughput: seconds a compiled row needs (compile, capture, timing)")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rec = {"benchmark": f"league_{args.what}", **env_bench.environment_info(args.device),
           "triton": _triton_version(args.device), "argv": sys.argv[1:]}
    path = Path(args.out) / f"league_{args.what}.json"

    def save():
        path.write_text(json.dumps(rec, indent=1, default=float))

    (throughput if args.what == "throughput" else learn)(args, rec, save)
    save()
    print_throughput(rec) if args.what == "throughput" else print_learn(rec)


if __name__ == "__main__":
    main()
