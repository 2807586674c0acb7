"""Skull King on one GPU: env speed, rule-bot strength, the rules' properties over millions of games, the
CPU baseline on the same machine, PPO end to end, and learning to beat the rule bots.

    python3 bench/skullking_gpu.py SECTION --out OUTDIR [--budget 220] [--device cuda]

One section per command, each within its time budget (default 220 s; what does not fit is recorded as
skipped), each writing ``<out>/skullking_<section>.json`` after every result (device, versions, sizes,
results, errors, skips) and printing a table last:

- ``env``: env steps/s, decisions/s (acting agent rows) and games/s of four-player games with the random
  bot, auto-reset included, at several batch sizes: eager, and compiled with K steps captured in one
  CUDA graph ("graph"); with observations written every step ("obs") and without ("state": the
  transition and masks only, what a policy that builds its own inputs needs). The compiled steps are
  first checked to equal eager steps exactly (the state is integers).
- ``players``: the same in graph mode for 2, 3, 5, 6, 7 and 8 players, and four players with every
  advanced option, at the sizes given.
- ``checks``: random games to their end under ``nitro.envs.skullking.invariants`` (a legal move always
  exists, tricks add up, void tricks need a beast, masks only allow cards in hand that follow suit, ...),
  counted on the device over millions of games for several rulesets; every count must be 0.
- ``bots``: whole four-player games (eager), 32,768 per pairing: two heuristic against two basic bots, the
  heuristic bot against three random bots, the public basic heuristic against three random bots;
  win rate, mean score and bid accuracy with 95% confidence intervals; and bot games/s.
- ``cpu``: today's CPU envs on this machine's cores: whole four-player games/s of the plain-Python
  reference engine in one process and in one process per core (``--aldoeliacim PATH`` adds the Gymnasium
  env of aldoeliacim/skullking, where gymnasium and numpy are installed).
- ``ppo``: PPO iterations of the flat and hierarchical presets captured in a CUDA graph: env steps,
  decisions and agent rows per second; first a check that an iteration makes no host sync.
- ``learn``: ``--variant flat|hierarchical`` trained for ``--seconds`` (default 150), then played against
  the rule bots over whole games: the learning curve against three heuristic bots and the final policy's
  win rate, score, score margin and bid accuracy against each bot over ``--games`` (16,384) games.
  ``<out>/skullking_learn_<variant>/`` keeps the final policy. ``plot`` (no GPU: matplotlib) draws both
  variants' curves from ``OUTDIR`` into ``--picture`` (docs/skullking_learning.png).

Times are CUDA-event medians of repeated calls after warm-up. Sizes: ``--sizes`` (env counts).
``--device cpu`` dry-runs the code paths at small sizes (no CUDA graphs).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nitro.core import rng, tree  # noqa: E402
from nitro.core.env import autoreset_step  # noqa: E402
from nitro.envs.skullking import invariants, match  # noqa: E402
from nitro.envs.skullking.env import SkullKing  # noqa: E402
from nitro.envs.skullking.params import SkullKingParams  # noqa: E402
from nitro.envs.skullking.state import OVER  # noqa: E402
from nitro.train import checkpoint  # noqa: E402
from nitro.train.config import load, to_dict  # noqa: E402
from nitro.train.evaluate import evaluate_vs_bots  # noqa: E402
from nitro.train.ppo import Trainer  # noqa: E402
from tests.envs.skullking.reference import Game  # noqa: E402  (the plain-Python engine of the lockstep tests)

ADVANCED = {"kraken": True, "white_whale": True, "loot": True, "pirate_abilities": True}
CHECK_RULESETS = {
    "base-4p": {"num_players": 4},
    "advanced-5p": {"num_players": 5, **ADVANCED},
    "graybeard-2p": {"num_players": 2, "kraken": True, "white_whale": True, "pirate_abilities": True},
    "rascal-cannon-6p": {"num_players": 6, "scoring": "rascal_cannon", "loot": True, "tigress": "escape"},
    "other-readings-4p": {"num_players": 4, **ADVANCED, "escape_then_character": "defer",
                          "kraken_next_leader": "left_of_kraken", "whale_void_next_leader": "whale_player",
                          "whale_escapes_only": "first_escape"},
    "capped-8p": {"num_players": 8, "kraken": True, "white_whale": True, "loot": True},
}
PLAYER_SETS = {f"{n}p": {"num_players": n} for n in (2, 3, 5, 6, 7, 8)} | {"advanced-4p": {"num_players": 4, **ADVANCED}}


# --- bookkeeping -------------------------------------------------------------------------------------------
class Recorder:
    """A section's JSON, rewritten after every result, error or skip."""

    def __init__(self, out: Path, section: str, device: str, budget: float, args: dict):
        self.path = out / f"skullking_{section}.json"
        self.deadline = time.monotonic() + budget
        self.data = {"bench": f"skullking_{section}", **_env_info(device), "args": args, "status": "running",
                     "dry_run": device != "cuda" and section != "cpu", "results": [], "errors": [], "skipped": []}
        self.flush()

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, what: str, fn, needs_s: float) -> None:
        """Run ``fn`` (which calls ``add``) if about ``needs_s`` seconds are left; record any failure."""
        if self.time_left() < needs_s:
            self.data["skipped"].append({"what": what, "why": f"{self.time_left():.0f} s left, needs ~{needs_s:.0f} s"})
            print(f"skip {what}", flush=True)
            return self.flush()
        print(f"{what} ...", flush=True)
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - one failure must not lose the other measurements
            self.data["errors"].append({"what": what, "error": f"{type(exc).__name__}: {exc}"[:3000],
                                        "trace": traceback.format_exc()[-3000:]})
            print(f"  !! {what}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            self.flush()
            if DEVICE == "cuda":
                torch.cuda.empty_cache()

    def add(self, **row) -> None:
        self.data["results"].append(row)
        print("  -> " + json.dumps(row), flush=True)
        self.flush()

    def flush(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)


def _cpu_name() -> str:
    try:
        model = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
        return model.split(":", 1)[1].strip()
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _env_info(device: str) -> dict:
    info = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "torch": torch.__version__, "python": platform.python_version(), "cpu": _cpu_name(),
            "cpu_cores": len(os.sched_getaffinity(0))}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                        text=True, timeout=10, check=False).stdout.strip() or None
    except Exception:  # noqa: BLE001 - informational only
        info["commit"] = None
    return info


DEVICE = "cuda"


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _time(fn, repeats: int) -> float:
    """Median seconds per call (CUDA events on CUDA), after one warm-up call."""
    fn()
    _sync()
    times = []
    for _ in range(repeats):
        if DEVICE == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


# --- the random-bot step loop ----------------------------------------------------------------------------
def _body(env: SkullKing, with_obs: bool):
    """One step of every env with the random bot and auto-reset; counts decisions and finished games."""
    bot = env.bots()["random"]

    def body(c):
        s, key, decisions, games = c[:4]
        k_act, k_env, k_next = rng.split(key, 3)
        acting = env.acting(s)
        t = autoreset_step(env, s, bot(s, k_act), k_env)
        out = (t.state, k_next, decisions + acting.sum(), games + t.terminated.sum(), t.reward, t.terminated)
        return out + (t.obs,) if with_obs else out

    return body


def _carry(env: SkullKing, body, num_envs: int, seed: int = 0):
    key = rng.env_keys(rng.key(seed, DEVICE), num_envs)
    s = env.reset(rng.fold_in(key, 1), num_envs, torch.device(DEVICE))
    zero = torch.zeros((), dtype=torch.int64, device=DEVICE)
    probe = body((s, key, zero, zero))  # shapes of the carried outputs
    return (s, key, zero.clone(), zero.clone(), *probe[4:])


class Looper:
    """K steps per call: eager, or compiled (batch dimension dynamic: one compile serves every size) and
    captured in one CUDA graph."""

    def __init__(self, body, carry, steps: int, mode: str, compiled=None):
        self.steps, self.carry = steps, carry
        self.fn = body if mode == "eager" else compiled
        self.graph = None
        if mode == "graph" and DEVICE == "cuda":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # compile and autotune outside the capture
                c = tree.clone(carry)
                for _ in range(2):
                    c = self.fn(c)
            torch.cuda.current_stream().wait_stream(side)
            self.carry = tree.clone(carry)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                c = self.carry
                for _ in range(steps):
                    c = self.fn(c)
                tree.copy_(self.carry, c)

    def __call__(self):
        if self.graph is not None:
            self.graph.replay()
            return self.carry
        c = self.carry
        for _ in range(self.steps):
            c = self.fn(c)
        self.carry = c
        return c


def _compiled(body):
    """Inductor on CUDA; on the CPU dry run only the tracing is exercised (aot_eager)."""
    return torch.compile(body, fullgraph=True, dynamic=None, backend="inductor" if DEVICE == "cuda" else "aot_eager")


def _mark_dynamic(carry) -> None:
    for x in tree.leaves(carry):
        if x.dim():
            torch._dynamo.mark_dynamic(x, 0)


def _speed(rec: Recorder, name: str, params: dict, num_envs: int, mode: str, with_obs: bool, steps: int,
           repeats: int, compiled_cache: dict) -> None:
    env = SkullKing(SkullKingParams(**params, checked=False))
    body = _body(env, with_obs)
    carry = _carry(env, body, num_envs)
    fn = None
    if mode != "eager":
        cache_key = (name, with_obs)
        if cache_key not in compiled_cache:
            compiled_cache[cache_key] = _compiled(body)
        fn = compiled_cache[cache_key]
        _mark_dynamic(carry)
    t0 = time.perf_counter()
    loop = Looper(body, carry, steps, mode, fn)
    loop()
    _sync()
    setup_s = time.perf_counter() - t0
    before = [int(x) for x in loop.carry[2:4]]  # sync-ok: counters, outside the timed calls
    seconds = _time(loop, repeats)
    after = [int(x) for x in loop.carry[2:4]]  # sync-ok
    calls = repeats + 1  # the warm-up call of _time also stepped
    decisions, games = ((a - b) / calls for a, b in zip(after, before))
    rec.add(ruleset=name, players=env.num_agents, num_envs=num_envs, mode=mode, obs=with_obs, steps_per_call=steps,
            median_s=seconds, setup_s=setup_s, steps_per_s=num_envs * steps / seconds,
            decisions_per_s=decisions / seconds, games_per_s=games / seconds,
            decisions_per_step=decisions / (num_envs * steps), obs_floats_per_agent=env.observation_space.shape[0])


def _check_compiled(rec: Recorder, params: dict, num_envs: int, steps: int) -> None:
    """Compiled steps equal eager steps: every state field, reward and termination, exactly."""
    env = SkullKing(SkullKingParams(**params, checked=False))
    body = _body(env, True)
    carry = _carry(env, body, num_envs, seed=3)
    fn = _compiled(body)
    a, b = carry, tree.clone(carry)
    mismatches = 0
    for _ in range(steps):
        a, b = body(a), fn(b)
        mismatches += sum(not torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b)))
    rec.add(check="compiled_equals_eager", ruleset=params, num_envs=num_envs, steps=steps, mismatching_leaves=mismatches,
            passed=mismatches == 0)


# --- sections ----------------------------------------------------------------------------------------------
def section_env(rec: Recorder, sizes: list[int], repeats: int) -> None:
    cache: dict = {}
    rec.run("compiled == eager", lambda: _check_compiled(rec, {"num_players": 4, **ADVANCED}, sizes[0], 300), 60)
    for with_obs in (True, False):
        rec.run(f"eager {sizes[0]} obs={with_obs}",
                lambda: _speed(rec, "base-4p", {"num_players": 4}, sizes[0], "eager", with_obs, 8, repeats, cache), 20)
        for n in sizes:
            rec.run(f"graph {n} obs={with_obs}",
                    lambda: _speed(rec, "base-4p", {"num_players": 4}, n, "graph", with_obs, 32, repeats, cache), 30)


def section_players(rec: Recorder, sizes: list[int], repeats: int) -> None:
    cache: dict = {}
    for name, params in PLAYER_SETS.items():
        for n in sizes:
            rec.run(f"{name} graph {n}", lambda: _speed(rec, name, params, n, "graph", True, 32, repeats, cache), 40)


def _check_games(rec: Recorder, name: str, params: dict, num_envs: int) -> None:
    """Random games from reset to their end, every state checked; counts per property."""
    env = SkullKing(SkullKingParams(**params, checked=False))
    bot = env.bots()["random"]
    key = rng.env_keys(rng.key(7, DEVICE), num_envs)
    k_reset, key = rng.split(key)
    s = env.reset(k_reset, num_envs, torch.device(DEVICE))
    counts = torch.zeros(len(invariants.PROPERTIES), dtype=torch.int64, device=DEVICE)
    decisions = torch.zeros((), dtype=torch.int64, device=DEVICE)
    t0 = time.perf_counter()
    steps = match.max_steps(env)
    for _ in range(steps):
        mask = env.action_mask(s)
        counts += invariants.violations(env.params, s, mask)
        decisions += env.acting(s).sum()
        k_act, k_env, key = rng.split(key, 3)
        s, *_ = env.step(s, bot(s, k_act), k_env)
    over = int((s.phase == OVER).sum())  # sync-ok: once per ruleset
    result = dict(zip(invariants.PROPERTIES, counts.tolist()))  # sync-ok
    rec.add(check="invariants", ruleset=name, games=num_envs, games_finished=over, steps=steps,
            decisions=int(decisions), seconds=time.perf_counter() - t0, violations=result,  # sync-ok
            passed=over == num_envs and not any(result.values()))


def section_checks(rec: Recorder, sizes: list[int], repeats: int) -> None:
    games = sizes[-1]
    for name, params in CHECK_RULESETS.items():
        scale = 4 if params["num_players"] >= 6 else 1  # longer games: fewer of them per ruleset
        rec.run(f"invariants {name}", lambda: _check_games(rec, name, params, games // scale), 30)


def _pairing(rec: Recorder, seats: list[str], num_envs: int) -> None:
    env = SkullKing(SkullKingParams(num_players=len(seats), checked=False))
    bots = env.bots()
    t0 = time.perf_counter()
    result = match.play(env, [bots[b] for b in seats], num_envs, rng.key(11), DEVICE)
    _sync()
    seconds = time.perf_counter() - t0
    for name in dict.fromkeys(seats):
        rec.add(pairing=seats, player=name, **result.summary([i for i, b in enumerate(seats) if b == name]),
                games_per_s=num_envs / seconds)


def section_bots(rec: Recorder, sizes: list[int], repeats: int) -> None:
    games = sizes[-1]
    # the head-to-head first: it answers whether the heuristic is at least as strong as the public one
    for seats in (["heuristic", "basic", "heuristic", "basic"], ["heuristic", "random", "random", "random"],
                  ["basic", "random", "random", "random"], ["heuristic", "heuristic", "heuristic", "heuristic"]):
        rec.run(f"{' '.join(seats)}", lambda: _pairing(rec, seats, games), 20)


# --- today's CPU envs: one game at a time in Python, one process per core ----------------------------------
class _Deals:
    """Chance for the reference engine from Python's ``random``: a fresh shuffle of the whole deck per round
    (base game: Graybeard and Bendt, who need more, are not played here)."""

    def __init__(self, rnd: random.Random):
        self.rnd = rnd

    def deal(self, game: Game) -> list[set[int]]:
        deck = list(game.p.deck)
        self.rnd.shuffle(deck)
        d = game.dealt
        return [set(deck[i * d:(i + 1) * d]) for i in range(game.p.num_hands)]


def _reference_games(job: tuple[int, float]) -> tuple[int, int, float]:
    """Whole four-player games of the reference engine with random legal moves for ``seconds``:
    (games, decisions, seconds)."""
    seed, seconds = job
    rnd = random.Random(seed)
    params, deals = SkullKingParams(num_players=4), _Deals(rnd)
    games = decisions = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        game = Game(params, deals, 0, rnd.randrange(params.num_players))
        while not game.over:
            acts = {seat: rnd.choice(tuple(game.legal(seat))) for seat in game.acting()}
            decisions += len(acts)
            game.step(acts)
        games += 1
    return games, decisions, time.perf_counter() - t0


def _aldoeliacim_games(job: tuple[int, float, str]) -> tuple[int, int, float]:
    """aldoeliacim/skullking's ``SkullKingEnvMasked`` (the Gymnasium env its MaskablePPO trains on: one
    learning seat, three rule-based bots inside each step, a 190-float observation) with random legal
    actions for ``seconds``: (games, env steps, seconds)."""
    import logging

    import numpy as np

    seed, seconds, path = job
    sys.path.insert(0, path)
    from app.gym_env.skullking_env_masked import SkullKingEnvMasked

    logging.disable(logging.WARNING)
    env = SkullKingEnvMasked(opponent_bot_type="rule_based", opponent_difficulty="medium")
    pick = np.random.default_rng(seed)
    env.reset(seed=seed)
    games = steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, terminated, truncated, _ = env.step(int(pick.choice(np.flatnonzero(env.action_masks()))))
        steps += 1
        if terminated or truncated:
            env.reset()
            games += 1
    return games, steps, time.perf_counter() - t0


def _cpu_rate(rec: Recorder, engine: str, worker, processes: int, seconds: float, extra: tuple = ()) -> None:
    jobs = [(1000 + i, seconds, *extra) for i in range(processes)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        done = pool.map(worker, jobs)
    games, units = sum(r[0] for r in done), sum(r[1] for r in done)
    rate = sum(r[0] / r[2] for r in done)  # the workers ran side by side: their rates add
    unit = "decisions" if engine == "reference" else "agent_steps"
    rec.add(cpu_engine=engine, processes=processes, seconds_per_process=seconds, games=games, games_per_s=rate,
            **{f"{unit}_per_s": sum(r[1] / r[2] for r in done), f"{unit}_per_game": units / max(games, 1)},
            load_average=os.getloadavg()[0])


def section_cpu(rec: Recorder, sizes: list[int], repeats: int) -> None:
    """Full four-player games per second on this machine's CPU cores, for the speed-up over today's CPU
    envs: the plain-Python reference engine (tests/envs/skullking/reference.py, the rules the env is checked
    against in lockstep; random legal moves, no observations) in one process and in one process per core;
    and with ``--aldoeliacim PATH`` (a checkout of aldoeliacim/skullking, whose env needs gymnasium and
    numpy) that env too, alternating with the reference so both see the same load."""
    for processes in ARGS.processes or dict.fromkeys((1, len(os.sched_getaffinity(0)))):
        for r in range(repeats):
            rec.run(f"reference x{processes} #{r}",
                    lambda: _cpu_rate(rec, "reference", _reference_games, processes, ARGS.cpu_seconds),
                    ARGS.cpu_seconds + 5)
            if ARGS.aldoeliacim:
                rec.run(f"aldoeliacim x{processes} #{r}",
                        lambda: _cpu_rate(rec, "aldoeliacim", _aldoeliacim_games, processes, ARGS.cpu_seconds,
                                          (ARGS.aldoeliacim,)), ARGS.cpu_seconds + 10)
    medians = {}
    for r in rec.data["results"]:
        medians.setdefault(f"{r['cpu_engine']} x{r['processes']}", []).append(r["games_per_s"])
    rec.data["median_games_per_s"] = {k: statistics.median(v) for k, v in medians.items()}


# --- PPO end to end ----------------------------------------------------------------------------------------
PRESETS = {"flat": "skullking", "hierarchical": "skullking_hierarchical"}
QUIET = ["run.console=false", "run.tensorboard=false"]


def _trainer(variant: str, num_envs: int, extra: list[str]) -> Trainer:
    preset, *more = variant.split("+")  # e.g. "flat+policy.hidden=[128,128]"
    cfg = load(PRESETS[preset], [*QUIET, f"run.device={DEVICE}", f"env.num_envs={num_envs}", *more, *extra])
    return Trainer(cfg, None)


def _ppo_speed(rec: Recorder, variant: str, num_envs: int, compiled: str, repeats: int) -> None:
    """PPO iterations per second with the iteration captured in a CUDA graph: env steps, decisions (agent
    rows that act: the samples the policy loss learns from) and stored agent rows per second."""
    t0 = time.perf_counter()
    tr = _trainer(variant, num_envs, [f"run.compile={compiled}"])
    if tr.graphed:
        tr._capture()
        step = tr.graph.replay
    else:
        tr.iteration()
        step = tr.iteration
    _sync()
    setup_s = time.perf_counter() - t0
    decisions = int(tr.buf.acting.sum())  # sync-ok: per iteration, outside the timed calls
    seconds = _time(step, repeats)
    rec.add(ppo=variant, num_envs=num_envs, compile=compiled, graph=tr.graphed, num_steps=tr.T,
            precision=tr.cfg.run.precision, hidden=tr.cfg.policy.hidden, epochs=tr.cfg.ppo.epochs,
            minibatches=tr.cfg.ppo.minibatches, setup_s=setup_s, iteration_s=seconds,
            env_steps_per_s=num_envs * tr.T / seconds, decisions_per_s=decisions / seconds,
            agent_rows_per_s=tr.L * tr.T / seconds, decisions_per_iteration=decisions)
    del tr
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def _check_no_sync(rec: Recorder, num_envs: int) -> None:
    """A PPO iteration of the flat preset (eager, not captured) makes no host sync."""
    tr = _trainer("flat", num_envs, ["run.graph=false", "run.compile=false"])
    tr.iteration()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        tr.iteration()
        error = None
    except RuntimeError as e:
        error = str(e)[:500]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    rec.add(check="ppo_iteration_no_sync", num_envs=num_envs, passed=error is None, error=error)


def section_ppo(rec: Recorder, sizes: list[int], repeats: int) -> None:
    if DEVICE == "cuda":
        rec.run("no host sync", lambda: _check_no_sync(rec, 4096), 30)
    for n in sizes:
        for variant in ("flat", "hierarchical"):
            rec.run(f"{variant} {n}", lambda: _ppo_speed(rec, variant, n, "false", repeats), 60)
    for variant in ("flat+policy.hidden=[128,128]", "flat"):
        rec.run(f"{variant} {sizes[0]} compiled", lambda: _ppo_speed(rec, variant, sizes[0], "true", repeats), 120)


# --- it learns ---------------------------------------------------------------------------------------------
class _OutOfTime(Exception):
    pass


def _save_policy(tr: Trainer, path: Path) -> str:
    """The actor-critic (and observation normalizer) alone, in the checkpoint format ``evaluate_vs_bots``
    reads: a training checkpoint would also hold the rollout state (hundreds of MB at these sizes)."""
    tensors = {f"policy.{k}": v for k, v in tr.policy.state_dict().items()}
    if tr.cfg.ppo.obs_norm:
        tensors.update({"obs_rms.mean": tr.obs_rms.mean, "obs_rms.var": tr.obs_rms.var})
    checkpoint.save(path, tensors, {"config": to_dict(tr.cfg), "update": tr.update, "global_step": tr.global_step})
    return str(path)


WHOLE_GAMES = {"episode": "game", "round_weights": None}
"""Evaluation plays whole ten-round games (the presets train on single rounds)."""


def section_learn(rec: Recorder, sizes: list[int], repeats: int) -> None:
    """Train one preset (``--variant``) for ``--seconds`` of training (graph capture not counted, and
    reported), keeping ``--snapshots`` copies of the policy along the way; then play each copy in one
    seat against three heuristic bots over whole games (``--curve-games`` each: the learning curve), and
    the last against the heuristic, basic and random bots over ``--games`` games each. It beats the
    heuristic bots when the lower end of its win rate's 95% interval is above 0.25 (a player as strong as
    them wins a quarter of the games) and the lower end of its score margin's (its score minus the three
    bots' mean in the same games) is above 0. The heuristic bot in the policy's seat is the reference."""
    variant, budget = ARGS.variant, ARGS.seconds
    snap_dir = rec.path.parent / f"skullking_learn_{variant}"
    shutil.rmtree(snap_dir, ignore_errors=True)
    tr = _trainer(variant, sizes[0], ["run.log_every=5", "run.compile=false", *ARGS.set])
    rec.data.update(variant=variant, num_envs=sizes[0], seconds=budget, config=to_dict(tr.cfg))
    curve, snapshots = [], []
    start = time.perf_counter()

    def on_log(m):
        t = m["perf/train_seconds"]
        curve.append({k: m[k] for k in ("update", "global_step", "perf/sps", "perf/train_seconds", "episode/return",
                                        "episode/length", "loss/entropy", "loss/explained_variance") if k in m})
        if t >= budget * (len(snapshots) + 1) / ARGS.snapshots or t >= budget:
            path = _save_policy(tr, snap_dir / f"update_{tr.update:06d}.safetensors")
            snapshots.append({"train_seconds": t, "update": tr.update, "global_step": tr.global_step, "path": path})
        if t >= budget:
            raise _OutOfTime

    try:
        tr.train(on_log=on_log)
    except _OutOfTime:
        pass
    rec.data.update(setup_seconds=tr.setup_seconds, wall_seconds=time.perf_counter() - start, curve=curve,
                    snapshots=snapshots)
    rec.flush()
    rec.deadline = time.monotonic() + ARGS.eval_seconds  # the games get their own budget after training
    env_params = {**tr.env_params, **WHOLE_GAMES}
    if snapshots:  # the final games first: if the budget runs short, the curve loses points, not the result
        rec.run("final", lambda: rec.data.update(final=_vs_bots(snapshots[-1]["path"], ["heuristic", "basic", "random"],
                                                                ARGS.games)), 10)
    env = SkullKing(SkullKingParams(**env_params))
    rec.run("heuristic in the policy's seat", lambda: rec.data.update(reference=match.play(
        env, [env.bots()["heuristic"]] * env.num_agents, ARGS.games, rng.key(12345), DEVICE).summary([0])), 5)
    final = rec.data.get("final", {}).get("heuristic")
    if final:
        rec.data["beats_heuristic"] = (final["win_rate"] - final["win_rate_ci95"] > 0.25
                                       and final["result_margin"] - final["result_margin_ci95"] > 0)
    for snap in snapshots:
        rec.run(f"curve at {snap['train_seconds']:.0f} s", lambda: snap.update(
            vs_heuristic=_vs_bots(snap["path"], ["heuristic"], ARGS.curve_games)["heuristic"]), 5)
        rec.flush()
    for snap in snapshots[:-1]:  # the last copy stays in OUT for later games (nitro tournament)
        Path(snap["path"]).unlink()


def _vs_bots(path: str, bots: list[str], games: int) -> dict:
    return evaluate_vs_bots(path, bots, games, checkpoint=path, device=DEVICE, env_params=WHOLE_GAMES)["opponents"]


def plot(out: Path, picture: Path) -> None:
    """The learning curves of both presets (win rate and score margin against three heuristic bots over
    training seconds, 95% intervals) from ``skullking_learn_{flat,hierarchical}.json`` in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for variant in PRESETS:
        path = out / f"skullking_learn_{variant}.json"
        if not path.exists():
            continue
        snaps = [s for s in json.loads(path.read_text()).get("snapshots", []) if "vs_heuristic" in s]
        t = [s["train_seconds"] for s in snaps]
        for ax, key in zip(axes, ("win_rate", "result_margin")):
            y = [s["vs_heuristic"][key] for s in snaps]
            e = [s["vs_heuristic"][key + "_ci95"] for s in snaps]
            ax.errorbar(t, y, yerr=e, marker="o", capsize=3, label=variant)
    for ax, title, level in zip(axes, ("win rate vs 3 heuristic bots", "score margin vs 3 heuristic bots"), (0.25, 0.0)):
        ax.axhline(level, color="grey", lw=0.8, ls="--")
        ax.set(title=title, xlabel="training seconds (one GPU)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(picture, dpi=120)
    print(f"wrote {picture}")


SECTIONS = {"env": section_env, "players": section_players, "checks": section_checks, "bots": section_bots,
            "cpu": section_cpu, "ppo": section_ppo, "learn": section_learn}
DEFAULT_SIZES = {"env": [1 << 14, 1 << 16, 1 << 18, 1 << 20], "players": [1 << 18], "checks": [1 << 20],
                 "bots": [1 << 15], "cpu": [], "ppo": [1 << 15, 1 << 17], "learn": [1 << 15]}
CPU_SIZES = {"env": [16, 32], "players": [16], "checks": [32], "bots": [32], "cpu": [], "ppo": [16], "learn": [16]}
ARGS = argparse.Namespace()


def _table(rec: Recorder) -> None:
    print(f"\n{rec.data['bench']} on {rec.data['device']}{' (dry run)' if rec.data['dry_run'] else ''} (torch "
          f"{rec.data['torch']}, triton {rec.data['triton']}; CPU {rec.data['cpu']} x{rec.data['cpu_cores']})")
    for r in rec.data["results"]:
        if "steps_per_s" in r:
            print(f"{r['ruleset']:>14} {r['num_envs']:>9} envs {r['mode']:>6} obs={r['obs']!s:>5}  "
                  f"{r['steps_per_s']:.3e} steps/s  {r['decisions_per_s']:.3e} decisions/s  {r['games_per_s']:.3e} games/s")
        elif r.get("check") == "invariants":
            print(f"{r['ruleset']:>18}: {r['games_finished']:>8} games, {r['decisions']:.3e} decisions, "
                  f"{'PASS' if r['passed'] else 'FAIL ' + json.dumps(r['violations'])}")
        elif "check" in r:
            print(f"{r['check']}: {'PASS' if r['passed'] else 'FAIL'}")
        elif "cpu_engine" in r:
            unit = "decisions" if "decisions_per_s" in r else "agent_steps"
            print(f"{r['cpu_engine']:>12} x{r['processes']:<3} CPU processes: {r['games_per_s']:9.1f} games/s  "
                  f"{r[unit + '_per_s']:.3e} {unit}/s  (load {r['load_average']:.1f})")
        elif "ppo" in r:
            print(f"{r['ppo']:>30} {r['num_envs']:>7} envs compile={r['compile']:<5} {r['env_steps_per_s']:.3e} env "
                  f"steps/s  {r['decisions_per_s']:.3e} decisions/s  {r['agent_rows_per_s']:.3e} rows/s  "
                  f"(setup {r['setup_s']:.0f} s)")
        elif "pairing" in r:
            print(f"{' '.join(r['pairing']):>36} {r['player']:>9}: win {r['win_rate']:.3f}±{r['win_rate_ci95']:.3f}  "
                  f"score {r['mean_score']:7.1f}±{r['mean_score_ci95']:.1f}  bids {r['bid_accuracy']:.3f}  "
                  f"({r['games']} games, {r['games_per_s']:.0f} games/s)")
    if "snapshots" in rec.data:
        d = rec.data
        last = d["curve"][-1] if d["curve"] else {"global_step": 0, "perf/train_seconds": 0}
        print(f"{d['variant']}: {d['num_envs']} envs, {last['global_step']:.3e} env steps in "
              f"{last['perf/train_seconds']:.0f} s of training (+{d['setup_seconds']:.0f} s setup)")
        for snap in d["snapshots"]:
            v = snap.get("vs_heuristic")
            if v:
                print(f"  at {snap['train_seconds']:5.0f} s: vs 3 heuristic win {v['win_rate']:.3f}±{v['win_rate_ci95']:.3f}"
                      f"  margin {v['result_margin']:+6.1f}±{v['result_margin_ci95']:.1f}  bids {v['bid_accuracy']:.3f}")
        for bot, v in d.get("final", {}).items():
            print(f"  final vs 3 {bot:>9}: win {v['win_rate']:.3f}±{v['win_rate_ci95']:.3f}  score {v['result']:6.1f}"
                  f"±{v['result_ci95']:.1f}  margin {v['result_margin']:+6.1f}±{v['result_margin_ci95']:.1f}  "
                  f"bids {v['bid_accuracy']:.3f}")
        if "reference" in d:
            v = d["reference"]
            print(f"  heuristic in its seat: win {v['win_rate']:.3f}±{v['win_rate_ci95']:.3f}  score "
                  f"{v['mean_score']:6.1f}±{v['mean_score_ci95']:.1f}  bids {v['bid_accuracy']:.3f}")
        print(f"  beats the heuristic bots: {d.get('beats_heuristic')}")
    for e in rec.data["errors"]:
        print(f"ERROR {e['what']}: {e['error'][:200]}")
    for s in rec.data["skipped"]:
        print(f"skipped {s['what']}: {s['why']}")


def main() -> None:
    global DEVICE, ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("section", choices=[*SECTIONS, "plot"])
    ap.add_argument("--out", required=True, help="output directory for skullking_<section>.json")
    ap.add_argument("--budget", type=float, default=220.0, help="seconds for the section (default 220)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--sizes", type=int, nargs="*", help="env counts (default per section)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cpu-seconds", type=float, default=10.0, help="cpu: seconds per measurement")
    ap.add_argument("--aldoeliacim", help="cpu: path of an aldoeliacim/skullking checkout to measure too")
    ap.add_argument("--processes", type=int, nargs="*", help="cpu: process counts (default 1 and one per core)")
    ap.add_argument("--variant", default="flat", choices=list(PRESETS), help="learn: the preset to train")
    ap.add_argument("--seconds", type=float, default=150.0, help="learn: training seconds")
    ap.add_argument("--eval-seconds", type=float, default=60.0, help="learn: budget of the games after training")
    ap.add_argument("--snapshots", type=int, default=6, help="learn: policy copies along the way (the curve)")
    ap.add_argument("--curve-games", type=int, default=4096, help="learn: games per snapshot against the bots")
    ap.add_argument("--games", type=int, default=16384, help="learn: games of the final policy against each bot")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="learn: config overrides on top of the preset, e.g. run.compile=true ppo.lr=1e-3")
    ap.add_argument("--picture", default="docs/skullking_learning.png", help="plot: where to draw the curves")
    ARGS = ap.parse_args()
    if ARGS.section == "plot":
        return plot(Path(ARGS.out), Path(ARGS.picture))
    DEVICE = ARGS.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU machine, or use --device cpu for a dry run")
    warnings.filterwarnings("ignore", message=".*lru_cache.*")
    sizes = ARGS.sizes or (DEFAULT_SIZES if DEVICE == "cuda" else CPU_SIZES)[ARGS.section]
    name = f"learn_{ARGS.variant}" if ARGS.section == "learn" else ARGS.section
    rec = Recorder(Path(ARGS.out), name, DEVICE, ARGS.budget, vars(ARGS))
    SECTIONS[ARGS.section](rec, sizes, ARGS.repeats)
    rec.data["status"] = "done"
    rec.flush()
    _table(rec)


if __name__ == "__main__":
    main()
