"""``nitro doctor``: what this machine is and how fast nitro runs on it, for bug reports and sizing.

It measures the preset's env (raw steps/s, eager and CUDA-graphed), policy inference (samples/s), one
PPO iteration (rollout and update, with its collect/learn split) at several batch sizes, and suggests
``env.num_envs``: the smallest size within `KNEE` of the best measured PPO throughput (more envs per
update means fewer, larger updates per sample, so past the knee extra envs buy little speed and cost
sample efficiency). It also reports the machine, the versions, the soccar meshes and whether the
soccar Triton kernels compile and agree with the PyTorch tick.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import shutil
import statistics
import subprocess
import time
from typing import Callable

import torch

from nitro import bench
from nitro.core.registry import make_env
from nitro.envs.soccar import Arena, MeshesNotFoundError, find_soccar_meshes
from nitro.train import config as C
from nitro.train.policy import ActorCritic
from nitro.train.ppo import Trainer

KNEE = 0.8
"""The suggested num_envs reaches this fraction of the best measured PPO steps/s."""
SIZES = {"cpu": (64, 256, 1024), "cuda": (4096, 16384, 65536, 262144)}
"""num_envs swept for the PPO iteration."""
ENV_SIZE = {"cpu": 1024, "cuda": 65536}
"""num_envs of the raw env and inference measurements."""


def _median_seconds(fn: Callable[[], None], device: torch.device, repeats: int) -> float:
    """Median wall time of ``fn`` after one warm-up call (CUDA events on CUDA)."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine(device: torch.device) -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu": _cpu_model(),
            "cpu_cores": os.cpu_count(), "cpu_cores_usable": len(os.sched_getaffinity(0)),
            "ram_gb": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9}
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=torch.cuda.get_device_name(device), gpu_count=torch.cuda.device_count(),
                    gpu_capability=f"{props.major}.{props.minor}", gpu_memory_gb=total / 1e9,
                    gpu_memory_free_gb=free / 1e9, **_nvidia_smi(device))
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_smi(device: torch.device) -> dict:
    """Utilisation and driver from nvidia-smi, where it is installed."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    index = device.index if device.index is not None else torch.cuda.current_device()
    try:
        out = subprocess.run([exe, f"--id={index}", "--query-gpu=utilization.gpu,driver_version",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20,
                             check=True).stdout
        util, driver = (x.strip() for x in out.strip().split(","))
        return {"gpu_utilization": float(util), "driver": driver}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


def versions() -> dict:
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    for package in ("triton", "numpy", "nitro-rl", "rocketsim", "textual"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = None
    return out


def soccar(device: torch.device, num_envs: int, ticks: int = 240) -> dict:
    """Where the meshes are, and on CUDA whether the Triton kernels compile and agree with the PyTorch
    path: ``num_envs`` balls thrown around the arena, ``ticks`` ticks of the fused kernel against the
    eager tick. As in bench/soccar_gpu.py, contacts amplify ulp differences (fused multiply-adds)
    chaotically, so the median position error must stay at rounding level (1e-2 UU)."""
    try:
        folder = find_soccar_meshes()
    except MeshesNotFoundError as error:
        return {"meshes": None, "meshes_error": str(error).split(";")[0], "kernels": "skipped: no meshes"}
    out = {"meshes": str(folder)}
    if device.type != "cuda":
        out["kernels"] = "not on CPU: the soccar Triton kernels need CUDA (CPU runs the PyTorch reference)"
        return out
    t0 = time.perf_counter()
    try:
        eager, fused = (_thrown_balls(num_envs, device, mode) for mode in ("eager", "fused"))
        goals_equal = True
        for _ in range(ticks // 30):
            e, f = eager.step(ticks=30), fused.step(ticks=30)
            goals_equal &= bool(torch.equal(e.goal_blue | e.goal_orange, f.goal_blue | f.goal_orange))  # sync-ok
        err = (eager.ball.pos - fused.ball.pos).norm(dim=1)
    except Exception as error:  # a report, not a crash: say what failed
        out["kernels"] = f"failed: {type(error).__name__}: {error}"[:500]
        return out
    median = float(err.median())  # sync-ok: a measurement
    out["kernels"] = "ok" if median <= 1e-2 else "mismatch"
    out["fused_vs_eager"] = {"envs": num_envs, "ticks": ticks, "median_pos_error_uu": median,
                             "max_pos_error_uu": float(err.max()), "goal_events_equal": goals_equal,
                             "seconds": time.perf_counter() - t0}  # compile, run and compare
    return out


def _thrown_balls(n: int, device: torch.device, mode: str) -> Arena:
    """n balls at random places of the arena with random velocities (the same for every mode)."""
    g = torch.Generator().manual_seed(3)
    u = lambda lo, hi: lo + (hi - lo) * torch.rand(n, 3, generator=g)  # noqa: E731
    arena = Arena(n, blue=0, orange=0, device=device, mode=mode)
    arena.set_ball(pos=u(torch.tensor([-3500.0, -4500.0, 100.0]), torch.tensor([3500.0, 4500.0, 1800.0])).to(device),
                   vel=u(-2500.0, 2500.0).to(device), ang_vel=u(-5.0, 5.0).to(device))
    return arena


def env_rates(env: C.EnvConfig, device: torch.device, num_envs: int, steps: int, repeats: int) -> list[dict]:
    """Raw steps/s of the preset's env (with its params), eager and on CUDA graphed."""
    modes = ["eager", "graph"] if device.type == "cuda" else ["eager"]
    return [bench.bench_env(env.id, num_envs, steps, device, mode, repeats, **env.params) for mode in modes]


def inference_rate(cfg: C.TrainConfig, device: torch.device, num_envs: int, repeats: int) -> dict:
    """Policy forward passes plus action sampling: samples/s."""
    env = make_env(cfg.env.id, **cfg.env.params)
    policy = ActorCritic(env.observation_space.shape[0], env.action_space, cfg.policy, device).to(device)
    obs = torch.randn(num_envs, env.observation_space.shape[0], device=device)
    hidden = policy.initial_hidden(num_envs, device)
    bf16 = cfg.run.precision == "bf16"

    @torch.no_grad()
    def forward():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out, _, _ = policy(obs, hidden, None)
        policy.dist.mode(out)

    seconds = _median_seconds(forward, device, repeats)
    return {"num_envs": num_envs, "precision": cfg.run.precision, "seconds": seconds,
            "samples_per_s": num_envs / seconds}


def ppo_rate(cfg: C.TrainConfig, device: torch.device, num_envs: int, repeats: int) -> dict:
    """One PPO iteration (rollout + update) as training runs it: CUDA-graphed on CUDA, uncompiled."""
    c = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, num_envs=num_envs),
                            run=dataclasses.replace(cfg.run, device=str(device), compile="false"))
    trainer = Trainer(c)
    if trainer.graphed:
        trainer._capture()
        step = trainer.graph.replay
    else:
        step = trainer.iteration
    seconds = _median_seconds(step, device, repeats)
    steps = num_envs * c.ppo.num_steps
    split = trainer.phases.read()  # sync-ok: measurement
    return {"num_envs": num_envs, "num_steps": c.ppo.num_steps, "graphed": trainer.graphed,
            "update_seconds": seconds, "steps_per_s": steps / seconds, **{f"{k}_seconds": v for k, v in split.items()}}


def suggest(rates: list[dict]) -> dict:
    """The smallest measured num_envs within KNEE of the best PPO steps/s."""
    ok = [r for r in rates if "steps_per_s" in r]
    if not ok:
        return {}
    best = max(r["steps_per_s"] for r in ok)
    pick = min((r for r in ok if r["steps_per_s"] >= KNEE * best), key=lambda r: r["num_envs"])
    return {"num_envs": pick["num_envs"], "steps_per_s": pick["steps_per_s"], "best_steps_per_s": best,
            "rule": f"smallest measured env.num_envs within {KNEE:.0%} of the best PPO steps/s"}


def run(preset: str = "cartpole", device: str = "auto", quick: bool = False, log: Callable[[str], None] = print) -> dict:
    """Every measurement; ``log`` hears progress lines."""
    dev = C.resolve_device(device)
    cfg = C.load(preset, [f"run.device={dev}"])
    kind = dev.type if dev.type in SIZES else "cpu"
    repeats = 3 if quick else 5
    sizes = SIZES[kind][:2] if quick else SIZES[kind]
    report = {"preset": preset, "env": cfg.env.id, "device": str(dev), "preset_num_envs": cfg.env.num_envs}
    log("machine and versions")
    report["machine"], report["versions"] = machine(dev), versions()
    log("soccar meshes and kernels")
    report["soccar"] = soccar(dev, 1024 if quick else 4096)
    n = ENV_SIZE[kind]
    log(f"env steps/s ({cfg.env.id}, {n} envs)")
    report["env_steps"] = env_rates(cfg.env, dev, n, 20 if quick else 100, repeats)
    log(f"policy inference ({n} envs)")
    report["inference"] = inference_rate(cfg, dev, n, repeats)
    report["ppo"] = []
    for size in sizes:
        log(f"PPO iteration at {size} envs")
        try:
            report["ppo"].append(ppo_rate(cfg, dev, size, repeats))
        except torch.OutOfMemoryError:
            report["ppo"].append({"num_envs": size, "error": "out of memory"})
            break
        finally:
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    report["suggestion"] = suggest(report["ppo"])
    return report


def text(report: dict) -> str:
    """The report as lines for a terminal."""
    m, v, s = report["machine"], report["versions"], report["soccar"]
    lines = [f"machine   {m['cpu']} ({m['cpu_cores_usable']}/{m['cpu_cores']} cores usable), {m['ram_gb']:.0f} GB RAM"]
    if "gpu" in m:
        util = f", {m['gpu_utilization']:.0f}% busy" if "gpu_utilization" in m else ""
        lines.append(f"gpu       {m['gpu']} x{m['gpu_count']} (sm {m['gpu_capability']}, {m['gpu_memory_gb']:.0f} GB, "
                     f"{m['gpu_memory_free_gb']:.0f} GB free{util}; driver {m.get('driver', '?')})")
    lines.append("versions  " + ", ".join(f"{k} {val}" for k, val in v.items() if val is not None))
    lines.append(f"soccar    meshes: {s['meshes'] or s.get('meshes_error')}; kernels: {s['kernels']}")
    for r in report["env_steps"]:
        lines.append(f"env       {r['env']} {r['num_envs']} envs {r['mode']:>5}: {r['steps_per_s']:.3e} steps/s")
    i = report["inference"]
    lines.append(f"policy    {i['num_envs']} samples in {1e3 * i['seconds']:.3g} ms: {i['samples_per_s']:.3e} samples/s")
    for r in report["ppo"]:
        if "error" in r:
            lines.append(f"ppo       {r['num_envs']} envs: {r['error']}")
            continue
        split = (f" (collect {1e3 * r['collect_seconds']:.3g} ms, learn {1e3 * r['learn_seconds']:.3g} ms)"
                 if "collect_seconds" in r else "")
        lines.append(f"ppo       {r['num_envs']} envs x {r['num_steps']} steps: {1e3 * r['update_seconds']:.3g} ms per "
                     f"update{split}, {r['steps_per_s']:.3e} steps/s")
    sug = report["suggestion"]
    if sug:
        lines.append(f"suggest   env.num_envs={sug['num_envs']} for {report['preset']} on {report['device']} "
                     f"({sug['steps_per_s']:.3e} steps/s; {sug['rule']}; the preset uses {report['preset_num_envs']})")
    return "\n".join(lines)
