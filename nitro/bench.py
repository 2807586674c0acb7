"""Raw env throughput: random legal actions, auto-reset included, every step's outputs written.

``nitro bench ENV --num-envs N ... --steps T --mode eager compile graph`` runs this. Timing is the
median of ``repeats`` timed calls after warm-up, with CUDA events on CUDA (host clock on CPU).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

import nitro
from nitro.core import agents, fast, rng
from nitro.core.env import autoreset_step


def _body(env, num_envs: int):
    def body(carry):
        state, key = carry[0], carry[1]
        k_act, k_env, k_next = rng.split(key, 3)
        action = env.action_space.sample(agents.row_keys(k_act, env.num_agents), num_envs * env.num_agents,
                                         env.action_mask(state))  # one row per agent
        t = autoreset_step(env, state, action, k_env)
        # reward and done flags are carried out so every step writes them, as a rollout would
        return (t.state, k_next, t.reward, t.terminated, t.truncated)

    return body


def _timer(device: torch.device):
    if device.type == "cuda":
        def timed(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
    else:
        def timed(fn):
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
    return timed


def bench_env(env_id: str, num_envs: int, steps: int, device: str | torch.device, mode: str,
              repeats: int = 5, seed: int = 0, **params) -> dict:
    """Steps per second of ``env_id`` at ``num_envs`` envs, ``steps`` steps per timed call."""
    device = torch.device(device)
    env = nitro.make_env(env_id, **params)
    key = rng.env_keys(rng.key(seed, device), num_envs)
    state = env.reset(key, num_envs, device)
    probe = _body(env, num_envs)((state, key))  # shapes of the carried outputs
    carry = (state, key, *probe[2:])
    t0 = time.perf_counter()
    loop = fast.Loop(_body(env, num_envs), carry, steps, mode)
    loop()  # compile / warm up
    if device.type == "cuda":
        torch.cuda.synchronize()
    setup_s = time.perf_counter() - t0
    timed = _timer(device)
    times = [timed(loop) for _ in range(repeats)]
    median = statistics.median(times)
    return {
        "env": env_id, "num_envs": num_envs, "steps": steps, "mode": mode, "repeats": repeats,
        "median_s": median, "min_s": min(times), "max_s": max(times),
        "steps_per_s": num_envs * steps / median, "setup_s": setup_s,
    }


def environment_info(device: str | torch.device) -> dict:
    device = torch.device(device)
    info = {"torch": torch.__version__, "python": platform.python_version(), "device_type": device.type,
            "platform": platform.platform()}
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    else:
        info["device_name"] = platform.processor() or platform.machine()
    return info


DEFAULT_DIR = Path("runs") / "bench"
"""Where ``nitro bench`` writes its results unless told otherwise (beside the training runs)."""


def default_out(env_id: str, device: str | torch.device) -> Path:
    """``runs/bench/<env>_<device name>_<time>.json``."""
    name = environment_info(device)["device_name"].lower()
    slug = "".join(c if c.isalnum() else "-" for c in name).strip("-")[:40] or "cpu"
    return DEFAULT_DIR / f"{env_id.lower()}_{slug}_{time.strftime('%Y%m%d-%H%M%S')}.json"


def write_new(path: str | Path, text: str, unique: bool) -> Path:
    """Write ``text`` to a file that did not exist: ``path``, or with ``unique`` the first free one of
    ``path``, ``<stem>-2<suffix>``, ... (created exclusively, so two writers never share a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for k in range(1, 10_000 if unique else 2):
        candidate = path if k == 1 else path.with_name(f"{path.stem}-{k}{path.suffix}")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return candidate
    raise FileExistsError(f"{path} already exists; results are never overwritten: give a new file name or "
                          f"remove it")


def run(env_id: str, sizes: list[int], steps: int, device: str, modes: list[str], repeats: int,
        out: str | Path | None, print_fn=print, unique: bool = True) -> dict:
    """Benchmark every (size, mode) pair; print a table; write JSON to a new file ``out`` if given (with
    ``unique``, a free variant of its name when it is taken; without, a taken name is an error)."""
    record = {"benchmark": "env_steps", **environment_info(device), "results": []}
    for n in sizes:
        for mode in modes:
            try:
                r = bench_env(env_id, n, steps, device, mode, repeats)
            except Exception as e:  # one failing size/mode must not lose the others
                r = {"env": env_id, "num_envs": n, "steps": steps, "mode": mode, "error": repr(e)[:500]}
            record["results"].append(r)
            sps = f"{r['steps_per_s']:.3e}" if "steps_per_s" in r else r["error"][:60]
            print_fn(f"{env_id:>14} {n:>10} envs  {mode:>8}  {sps} steps/s")
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
    if out:
        print_fn(f"wrote {write_new(out, json.dumps(record, indent=1), unique)}")
    return record
