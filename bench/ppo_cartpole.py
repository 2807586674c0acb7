"""End-to-end PPO on CartPole-v1: throughput, where the time goes, and wall time to solve.

    python bench/ppo_cartpole.py throughput --num-envs 65536 262144 1048576 --out bench/results/a.json
    python bench/ppo_cartpole.py solve --num-envs 65536 --seeds 3 --out bench/results/b.json
    python bench/ppo_cartpole.py profile --num-envs 65536 --variants run.precision=bf16 --out p.json
    torchrun --nproc-per-node=2 bench/ppo_cartpole.py throughput --num-envs 262144 --out c.json  # per GPU

Throughput: iterations (T-step rollout + GAE + epochs x minibatches) replayed from the trainer's CUDA
graph, timed with CUDA events after warm-up, median of repeats. The breakdown times, at the same
sizes, a graph of T raw env steps with random actions (env), a graph of the rollout (env + inference
+ storage), and a graph of the update; inference = rollout - env, update = iteration - rollout.
Profile: the kernels of one compiled iteration (not graphed, so the profiler sees each kernel;
their durations are the graph's): count, total and mean time per kernel name, and the sum of all
kernel time, to compare with the graphed iteration's time (the gap is launch and scheduling).
Solve: wall time of ``Trainer.train`` until the mean return of the episodes finished in an update
reaches 475, compile and capture excluded (reported separately).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nitro import bench as env_bench  # noqa: E402
from nitro.core import fast, rng  # noqa: E402
from nitro.train.config import load  # noqa: E402
from nitro.train.ppo import Trainer  # noqa: E402

BASE = ["run.console=false", "run.tensorboard=false", "ppo.num_steps=16", "ppo.epochs=4", "ppo.minibatches=4"]


def _time(fn, repeats: int, device: torch.device) -> float:
    timed = env_bench._timer(device)
    return statistics.median(timed(fn) for _ in range(repeats))


def _graph(fn) -> torch.cuda.CUDAGraph:
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def throughput(n: int, extra: list[str], repeats: int) -> dict:
    cfg = load("cartpole", BASE + [f"env.num_envs={n}", "ppo.total_steps=10_000_000_000",
                                   "ppo.target_return=none"] + extra)
    t0 = time.perf_counter()
    tr = Trainer(cfg)
    if tr.graphed:
        tr._capture()
        run_iter = tr.graph.replay
    else:
        tr.iteration()
        run_iter = tr.iteration
    if tr.device.type == "cuda":
        torch.cuda.synchronize()
    setup = time.perf_counter() - t0
    t_iter = _time(run_iter, repeats, tr.device)
    world = tr.dist.world_size
    r = {"num_envs": n, "num_steps": tr.T, "variant": " ".join(extra) or "default", "setup_s": setup,
         "iteration_s": t_iter, "sps": world * n * tr.T / t_iter, "params": tr.opt.flat.numel(),
         "world_size": world}
    if tr.graphed and world == 1:
        collect = _graph(tr.collect)
        update = _graph(lambda: (tr.compute_advantages(), tr.update_normalizers(), tr.learn()))
        t_collect = _time(collect.replay, repeats, tr.device)
        t_update = _time(update.replay, repeats, tr.device)
        body = env_bench._body(tr.env, n)
        key = rng.env_keys(rng.key(0, tr.device), n)
        state = tr.env.reset(key, n, tr.device)
        probe = body((state, key))
        env_loop = fast.Loop(body, (state, key, *probe[2:]), tr.T, "graph")
        env_loop()
        t_env = _time(env_loop, repeats, tr.device)
        r.update({"collect_s": t_collect, "update_s": t_update, "env_s": t_env,
                  "share_env": t_env / t_iter, "share_inference": (t_collect - t_env) / t_iter,
                  "share_update": t_update / t_iter})
    return r


def profile(n: int, extra: list[str], repeats: int) -> dict:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    r = throughput(n, extra, repeats)
    cfg = load("cartpole", BASE + [f"env.num_envs={n}", "ppo.total_steps=10_000_000_000",
                                   "ppo.target_return=none", "run.graph=false"] + extra)
    tr = Trainer(cfg)
    for _ in range(3):
        tr.iteration()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        tr.iteration()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name, []).append(e.device_time)
    rows = sorted(({"kernel": k[:120], "count": len(v), "total_us": sum(v), "mean_us": sum(v) / len(v)}
                   for k, v in by_name.items()), key=lambda x: -x["total_us"])
    r.update({"kernels_per_iteration": len(kernels), "kernel_time_s": sum(e.device_time for e in kernels) / 1e6,
              "top_kernels": rows[:30]})
    return r


def solve(n: int, seed: int, extra: list[str]) -> dict:
    cfg = load("cartpole", BASE + [f"env.num_envs={n}", f"run.seed={seed}", "ppo.total_steps=2_000_000_000",
                                   "ppo.target_return=475", "run.log_every=1"] + extra)
    tr = Trainer(cfg)
    t0 = time.perf_counter()
    m = tr.train()
    return {"num_envs": n, "seed": seed, "variant": " ".join(extra) or "default",
            "solved": m.get("episode/return", 0) >= 475, "final_return": m.get("episode/return"),
            "train_seconds": tr.train_seconds, "setup_seconds": tr.setup_seconds,
            "wall_seconds": time.perf_counter() - t0, "updates": m["update"], "env_steps": m["global_step"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["throughput", "solve", "profile"])
    ap.add_argument("--num-envs", type=int, nargs="+", default=[65536, 262144, 1048576])
    ap.add_argument("--variants", nargs="+", default=["", "run.precision=bf16"],
                    help="space-separated override sets, one string each")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    record = {"benchmark": f"ppo_cartpole_{args.what}", **env_bench.environment_info("cuda" if torch.cuda.is_available() else "cpu"), "results": []}
    for n in args.num_envs:
        for variant in args.variants:
            extra = variant.split()
            for seed in range(1, args.seeds + 1) if args.what == "solve" else [None]:
                try:
                    if seed is not None:
                        r = solve(n, seed, extra)
                    else:
                        r = (profile if args.what == "profile" else throughput)(n, extra, args.repeats)
                except Exception as e:  # noqa: BLE001 - keep the other measurements
                    r = {"num_envs": n, "variant": variant, "seed": seed, "error": repr(e)[:500]}
                record["results"].append(r)
                if os.environ.get("RANK", "0") == "0":
                    print(json.dumps(r), flush=True)
                    Path(args.out).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
