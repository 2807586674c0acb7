"""A newcomer's first hour: how long ``nitro train cartpole`` takes, cold and warm; how fast the README's
own loop (``env.step(env.sample_actions())`` on a ``nitro.make(..., mode="auto")`` handle) steps, against
the same loop on an eager handle; and (CPU) a step through the SB3 adapter at 8 envs against
Gymnasium's SyncVectorEnv of its own CartPole.

    python3 bench/first_hour.py OUTDIR                     # GPU: about 3 minutes on an H200
    python3 bench/first_hour.py OUTDIR --parts train sb3   # CPU

train: ``python3 -m nitro.cli train cartpole`` as a user runs it (a fresh process, the preset as it
is), wall time from start to exit. Cold: empty Inductor, Triton and Python bytecode caches (new folders
given through TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and PYTHONPYCACHEPREFIX: the lent GPU machines'
PyTorch install has no .pyc files, and PYTHONDONTWRITEBYTECODE set: without the prefix every run compiled
PyTorch's sources again, about 4 s, where a pip install has them precompiled); warm: the same command again,
reusing them. Each run must
reach the preset's target (mean return of the last 100 episodes >= 475). Each run's wall time is split
into phases: import (Python, PyTorch and nitro, up to the train command's start), setup (config,
device, env, policy, run directory), capture (compile and CUDA graph capture before the first update),
train (the update loop), finish (last checkpoint, closing the logs) and exit (interpreter and device
shutdown after the summary line); the command reports the middle four itself. One more warm run under
cProfile records the costliest functions (cumulative and own time), to name what the phases hold.
loop: the README's loop, timed around ``--steps`` iterations (CUDA events on a GPU, which include the
host's work: they wait for the Python loop), after warm-up, median of ``--repeats``. Correctness first
(GPU): the graphed handle's episodes equal the eager handle's (observations to 1e-5, Inductor's
rounding; flags where no float sits on a threshold).
sb3: microseconds per step of ``SB3VecEnv("CartPole-v1", num_envs=8, device="cpu")``, eager and with
``mode="aot"`` (the step compiled ahead of time; its first step compiles the library into nitro's cache,
or loads it, timed apart), and of ``gymnasium.vector.SyncVectorEnv`` over 8 ``gymnasium.make("CartPole-v1")``,
the same random actions, alternated in one process (so all see the same machine load), median of
``--repeats``.
Writes OUTDIR/first_hour_<device>.json and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nitro  # noqa: E402
from nitro.bench import _timer  # noqa: E402


def train_runs(out: Path, warm_runs: int) -> tuple[list[dict], dict]:
    """``nitro train cartpole`` cold, then ``warm_runs`` times warm, then once more warm under cProfile:
    the timed runs' rows, and the profiled run's row with its costliest functions."""
    out = out.resolve()  # the command runs in ``out``: a relative run.dir would land below it
    caches = Path(tempfile.mkdtemp(prefix="nitro-first-hour-"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"), "TRITON_CACHE_DIR": str(caches / "triton"),
           "PYTHONPYCACHEPREFIX": str(caches / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's Python, which keeps the bytecode it compiles
    rows = [train_run(out, env, "cold" if i == 0 else f"warm {i}") for i in range(1 + warm_runs)]
    profile = out / "train.prof"
    profiled = train_run(out, env, "warm, under cProfile", ("-m", "cProfile", "-o", str(profile)))
    stats = pstats.Stats(str(profile))
    for order in ("cumulative", "tottime"):  # the functions that hold the fixed costs (imports, set-up, capture)
        keys = sorted(stats.stats, key=lambda k: -stats.stats[k][3 if order == "cumulative" else 2])[:40]
        profiled[order] = [{"function": _where(k), "calls": stats.stats[k][1], "tottime_s": stats.stats[k][2],
                            "cumtime_s": stats.stats[k][3]} for k in keys]
    return rows, profiled


def train_run(out: Path, env: dict, name: str, python_args: tuple[str, ...] = ()) -> dict:
    """One ``nitro train cartpole`` in a fresh process: wall and CPU seconds, and its phases."""
    launched, t0, cpu0 = time.time(), time.perf_counter(), os.times()
    done = subprocess.run([sys.executable, *python_args, "-m", "nitro.cli", "train", "cartpole", "run.console=false",
                           f"run.dir={out / 'runs'}"], env=env, cwd=out, capture_output=True, text=True, check=False)
    wall, cpu1, ended = time.perf_counter() - t0, os.times(), time.time()
    if done.returncode != 0:
        raise SystemExit(f"nitro train cartpole failed ({done.returncode}):\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    if not summary.get("target_reached"):
        raise SystemExit(f"nitro train cartpole did not reach its target: {summary}")
    metrics = [json.loads(line) for line in (Path(summary["run"]) / "metrics.jsonl").read_text().splitlines()]
    print(f"train {name}: {wall:.1f} s wall", flush=True)
    return {"run": name, "wall_s": wall,
            "cpu_s": (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system),
            "train_s": metrics[-1]["perf/train_seconds"], "global_step": summary["global_step"],
            "outcome": re.sub(r"; run: .*", "", lines[-2]),
            "phases_s": {"import": summary["started"] - launched, **summary["phase_seconds"],
                         "exit": ended - summary["printed"]}}


def _where(key: tuple[str, int, str]) -> str:
    """A profile entry as ``path:line(function)``, paths from the package or site-packages folder on."""
    path, line, function = key
    path = re.sub(r".*/(site-packages|dist-packages)/", "", path).replace(str(ROOT) + os.sep, "")
    return f"{path}:{line}({function})"


def check_loop(num_envs: int, steps: int) -> None:
    """The graphed handle steps the same episodes as the eager one (CUDA)."""
    eager = nitro.make("CartPole-v1", num_envs=num_envs, device="cuda", seed=3)
    graphed = nitro.make("CartPole-v1", num_envs=num_envs, device="cuda", seed=3, mode="auto")
    assert graphed.mode == "graph", graphed.mode
    assert torch.equal(eager.reset()[0], graphed.reset()[0])
    split = torch.zeros(num_envs, dtype=torch.bool, device="cuda")  # envs whose episodes parted ways
    for _ in range(steps):
        actions = eager.sample_actions()
        assert torch.equal(actions, graphed.sample_actions())  # Discrete: integer draws, exact
        e, g = eager.step(actions), graphed.step(actions.clone())
        # a flag may differ only where a float lands on a threshold after rounding (rare); that env's
        # episodes part ways from then on
        split |= (e[2] != g[2]) | (e[3] != g[3])
        # Inductor contracts the physics into FMAs: a few ulps apart per step, which the unstable pole
        # amplifies through long episodes (on an H200, 300 x 8192 steps: up to 1.06e-2 in one element).
        # A wrong step or reset moves most envs by 0.1-1; rounding moves a handful: at most 0.1% of the
        # elements beyond 1e-3, and a mean error below 1e-5
        error = (e[0] - g[0]).abs()[~split]
        assert (error > 1e-3).float().mean() < 1e-3 and float(error.mean()) < 1e-5, float(error.max())  # sync-ok
    assert split.float().mean() < 1e-3, float(split.float().mean())  # sync-ok


def loop_rate(num_envs: int, mode: str, steps: int, repeats: int) -> float:
    """Env steps per second of the README's loop."""
    env = nitro.make("CartPole-v1", num_envs=num_envs, seed=0, mode=mode)
    env.reset()

    def loop():
        for _ in range(steps):
            env.step(env.sample_actions())

    for _ in range(3):  # compile, capture and settle
        loop()
    timed = _timer(env.device)
    return num_envs * steps / statistics.median(timed(loop) for _ in range(repeats))


def sb3_step_us(repeats: int, steps: int = 2000) -> dict:
    """Microseconds per step at 8 CPU envs: nitro's SB3 adapter (eager, and ``mode="aot"``, the step
    compiled ahead of time) and Gymnasium's SyncVectorEnv; and seconds to the aot env's first step
    (compiling its library, or loading it from nitro's cache)."""
    import gymnasium as gym

    from nitro.adapters.sb3 import SB3VecEnv

    actions = [np.random.default_rng(i).integers(0, 2, 8) for i in range(64)]  # random play: frequent resets
    envs = {"nitro_sb3": SB3VecEnv("CartPole-v1", num_envs=8, device="cpu"),
            "nitro_sb3_aot": SB3VecEnv("CartPole-v1", num_envs=8, device="cpu", mode="aot")}
    for env in envs.values():
        env.reset()
    start = time.perf_counter()
    envs["nitro_sb3_aot"].step(actions[0])
    first_step_s = time.perf_counter() - start
    theirs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(8)])
    theirs.reset(seed=0)

    def loop(env):
        def run():
            for i in range(steps):
                env.step_async(actions[i % 64])
                env.step_wait()

        return run

    def theirs_loop():
        for i in range(steps):
            theirs.step(actions[i % 64])

    loops = {**{name: loop(env) for name, env in envs.items()}, "gymnasium_sync": theirs_loop}
    timed, times = _timer(torch.device("cpu")), {name: [] for name in loops}
    for run in loops.values():  # warm-up
        run()
    for _ in range(repeats):  # alternated, so all see the same machine load
        for name, run in loops.items():
            times[name].append(timed(run) / steps * 1e6)
    return ({k: statistics.median(v) for k, v in times.items()}
            | {"aot_first_step_s": first_step_s, "num_envs": 8, "threads": torch.get_num_threads()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output folder")
    ap.add_argument("--parts", nargs="+", default=["loop", "train"], choices=["loop", "train", "sb3"])
    ap.add_argument("--num-envs", nargs="+", type=int, help="loop sizes (default: 8,192 to 1M on a GPU, "
                                                              "4,096 on a CPU)")
    ap.add_argument("--steps", type=int, default=100, help="loop iterations per timed call")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--warm-runs", type=int, default=2, help="warm runs of nitro train cartpole")
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if cuda else \
        f"cpu ({os.cpu_count()} cores, {platform.processor() or platform.machine()})"
    result = {"device": device, "torch": torch.__version__, "triton": _triton_version(),
              "python": sys.version.split()[0], "load_average_at_start": os.getloadavg(), "loop": [], "train": [],
              "sb3": None, "train_profile": None}
    slug = re.sub(r"[^a-z0-9]+", "_", (device if cuda else "cpu").lower()).strip("_")
    path = args.out / f"first_hour_{slug}.json"
    if "loop" in args.parts:
        if cuda:
            check_loop(8192, 300)
        for n in args.num_envs or ([8192, 65536, 262144, 1048576] if cuda else [4096]):
            row = {"num_envs": n, "steps": args.steps}
            for mode in ("auto", "eager"):
                row[f"{mode}_sps"] = loop_rate(n, mode, args.steps, args.repeats)
            result["loop"].append(row)
            print(f"loop {n}: auto {row['auto_sps']:.3g}, eager {row['eager_sps']:.3g} steps/s", flush=True)
            path.write_text(json.dumps(result, indent=1))
    if "sb3" in args.parts:
        result["sb3"] = sb3_step_us(args.repeats)
        path.write_text(json.dumps(result, indent=1))
    if "train" in args.parts:
        result["train"], result["train_profile"] = train_runs(args.out, args.warm_runs)
    result["load_average_at_end"] = os.getloadavg()
    path.write_text(json.dumps(result, indent=1))
    print(f"\n{device}, torch {result['torch']}, triton {result['triton']}, load average "
          f"{result['load_average_at_start'][0]:.1f} -> {result['load_average_at_end'][0]:.1f}: {path}")
    if result["loop"]:
        print(f"{'envs':>10} {'mode=auto':>12} {'eager':>12}   (README loop, env steps/s)")
        for r in result["loop"]:
            print(f"{r['num_envs']:>10,} {r['auto_sps']:>12.3g} {r['eager_sps']:>12.3g}")
    if result["sb3"]:
        r = result["sb3"]
        print(f"8 CPU envs, us/step: nitro SB3VecEnv {r['nitro_sb3']:.0f}, with mode='aot' {r['nitro_sb3_aot']:.0f} "
              f"(first step {r['aot_first_step_s']:.1f} s), Gymnasium SyncVectorEnv {r['gymnasium_sync']:.0f}")
    if result["train"]:
        print(f"{'nitro train cartpole':<22} {'wall s':>8} {'cpu s':>8} {'training s':>11} {'env steps':>11}")
        for r in result["train"]:
            print(f"{r['run']:<22} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['train_s']:>11.2f} {r['global_step']:>11,}")
        print(f"{'phases, s':<22} " + " ".join(f"{p:>8}" for p in result["train"][0]["phases_s"]))
        for r in result["train"]:
            print(f"{r['run']:<22} " + " ".join(f"{v:>8.2f}" for v in r["phases_s"].values()))
        r = result["train_profile"]
        print(f"under cProfile: {r['wall_s']:.1f} s wall; " + ", ".join(f"{k} {v:.2f}" for k, v in r["phases_s"].items()))
        print(f"{'cumulative s':>12}  function (the costliest of the profiled run)")
        for f in r["cumulative"][:25]:
            print(f"{f['cumtime_s']:>12.2f}  {f['function']}")


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


if __name__ == "__main__":
    main()
