"""Skull King on one GPU: env speed, rule-bot strength, and the rules' properties over millions of games.

    python bench/skullking_gpu.py SECTION --out bench/results [--budget 220] [--device cuda]

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
- ``bots``: whole four-player games (eager), 32,768 per pairing: the heuristic bot against three random
  bots, the public basic heuristic against three random bots, and two heuristic against two basic bots;
  win rate, mean score and bid accuracy with 95% confidence intervals; and bot games/s.

Times are CUDA-event medians of repeated calls after warm-up. Sizes: ``--sizes`` (env counts).
``--device cpu`` dry-runs the code paths at small sizes (no CUDA graphs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
                     "results": [], "errors": [], "skipped": []}
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


def _env_info(device: str) -> dict:
    info = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run)",
            "torch": torch.__version__, "python": platform.python_version()}
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
    for seats in (["heuristic", "random", "random", "random"], ["basic", "random", "random", "random"],
                  ["heuristic", "basic", "heuristic", "basic"], ["heuristic", "heuristic", "heuristic", "heuristic"]):
        rec.run(f"{' '.join(seats)}", lambda: _pairing(rec, seats, games), 20)


SECTIONS = {"env": section_env, "players": section_players, "checks": section_checks, "bots": section_bots}
DEFAULT_SIZES = {"env": [1 << 14, 1 << 16, 1 << 18, 1 << 20], "players": [1 << 18], "checks": [1 << 20],
                 "bots": [1 << 15]}
CPU_SIZES = {"env": [16, 32], "players": [16], "checks": [32], "bots": [32]}


def _table(rec: Recorder) -> None:
    print(f"\n{rec.data['bench']} on {rec.data['device']} (torch {rec.data['torch']}, triton {rec.data['triton']})")
    for r in rec.data["results"]:
        if "steps_per_s" in r:
            print(f"{r['ruleset']:>14} {r['num_envs']:>9} envs {r['mode']:>6} obs={r['obs']!s:>5}  "
                  f"{r['steps_per_s']:.3e} steps/s  {r['decisions_per_s']:.3e} decisions/s  {r['games_per_s']:.3e} games/s")
        elif r.get("check") == "invariants":
            print(f"{r['ruleset']:>18}: {r['games_finished']:>8} games, {r['decisions']:.3e} decisions, "
                  f"{'PASS' if r['passed'] else 'FAIL ' + json.dumps(r['violations'])}")
        elif "check" in r:
            print(f"{r['check']}: {'PASS' if r['passed'] else 'FAIL'}")
        elif "pairing" in r:
            print(f"{' '.join(r['pairing']):>36} {r['player']:>9}: win {r['win_rate']:.3f}±{r['win_rate_ci95']:.3f}  "
                  f"score {r['mean_score']:7.1f}±{r['mean_score_ci95']:.1f}  bids {r['bid_accuracy']:.3f}  "
                  f"({r['games']} games, {r['games_per_s']:.0f} games/s)")
    for e in rec.data["errors"]:
        print(f"ERROR {e['what']}: {e['error'][:200]}")
    for s in rec.data["skipped"]:
        print(f"skipped {s['what']}: {s['why']}")


def main() -> None:
    global DEVICE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("section", choices=list(SECTIONS))
    ap.add_argument("--out", required=True, help="output directory for skullking_<section>.json")
    ap.add_argument("--budget", type=float, default=220.0, help="seconds for the section (default 220)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--sizes", type=int, nargs="*", help="env counts (default per section)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU machine, or use --device cpu for a dry run")
    warnings.filterwarnings("ignore", message=".*lru_cache.*")
    sizes = args.sizes or (DEFAULT_SIZES if DEVICE == "cuda" else CPU_SIZES)[args.section]
    rec = Recorder(Path(args.out), args.section, DEVICE, args.budget, vars(args))
    SECTIONS[args.section](rec, sizes, args.repeats)
    rec.data["status"] = "done"
    rec.flush()
    _table(rec)


if __name__ == "__main__":
    main()
