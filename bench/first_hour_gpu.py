"""A newcomer's first hour on a GPU: how long ``nitro train cartpole`` takes, cold and warm, and how fast
the README's own loop (``env.step(env.sample_actions())`` on a ``nitro.make(..., mode="auto")`` handle)
steps, against the same loop on an eager handle.

    python3 bench/first_hour_gpu.py OUTDIR                 # both parts, about 2-3 minutes on an H200
    python3 bench/first_hour_gpu.py OUTDIR --parts loop

train: ``python3 -m nitro.cli train cartpole`` as a user runs it (a fresh process, the preset as it
is), wall time from start to exit. Cold: empty Inductor and Triton caches (new folders given through
TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR); warm: the same command again, reusing them. Each run must
reach the preset's target (mean return of the last 100 episodes >= 475).
loop: the README's loop, timed with CUDA events around ``--steps`` iterations of
``env.step(env.sample_actions())`` (host work included: the events wait for the Python loop), after
warm-up, median of ``--repeats``. Correctness first: the graphed handle's episodes equal the eager
handle's (observations to 1e-5, Inductor's rounding; flags where no float sits on a threshold).
Writes OUTDIR/first_hour_h200.json (named after the device) and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nitro  # noqa: E402


def train_runs(out: Path, warm_runs: int) -> list[dict]:
    """Wall seconds of ``nitro train cartpole``, cold then ``warm_runs`` times warm."""
    caches = Path(tempfile.mkdtemp(prefix="nitro-first-hour-"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"), "TRITON_CACHE_DIR": str(caches / "triton")}
    rows = []
    for i in range(1 + warm_runs):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "nitro.cli", "train", "cartpole", "run.console=false",
                               f"run.dir={out / 'runs'}"], env=env, cwd=out, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"nitro train cartpole failed ({done.returncode}):\n{done.stderr[-3000:]}")
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        if not summary.get("target_reached"):
            raise SystemExit(f"nitro train cartpole did not reach its target: {summary}")
        metrics = [json.loads(line) for line in (Path(summary["run"]) / "metrics.jsonl").read_text().splitlines()]
        rows.append({"run": "cold" if i == 0 else f"warm {i}", "wall_s": wall,
                     "train_s": metrics[-1]["perf/train_seconds"], "global_step": summary["global_step"],
                     "return_recent": summary["episode/return_recent"],
                     "outcome": re.sub(r"; run: .*", "", done.stdout.strip().splitlines()[-2])})
        print(f"train {rows[-1]['run']}: {wall:.1f} s wall", flush=True)
    return rows


def check_loop(num_envs: int, steps: int) -> None:
    """The graphed handle steps the same episodes as the eager one."""
    eager = nitro.make("CartPole-v1", num_envs=num_envs, device="cuda", seed=3)
    graphed = nitro.make("CartPole-v1", num_envs=num_envs, device="cuda", seed=3, mode="auto")
    assert graphed.mode == "graph", graphed.mode
    assert torch.equal(eager.reset()[0], graphed.reset()[0])
    for _ in range(steps):
        actions = eager.sample_actions()
        assert torch.equal(actions, graphed.sample_actions())  # Discrete: integer draws, exact
        e, g = eager.step(actions), graphed.step(actions.clone())
        torch.testing.assert_close(e[0], g[0], atol=1e-5, rtol=0)  # Inductor's rounding of the physics
        # a flag may differ only where a float lands on a threshold after rounding (rare)
        assert (e[2] != g[2]).float().mean() < 1e-3 and (e[3] != g[3]).float().mean() < 1e-3


def loop_rate(num_envs: int, mode: str, steps: int, repeats: int) -> float:
    """Env steps per second of the README's loop."""
    env = nitro.make("CartPole-v1", num_envs=num_envs, seed=0, mode=mode)
    assert env.device.type == "cuda"
    env.reset()

    def loop():
        for _ in range(steps):
            actions = env.sample_actions()
            obs, reward, terminated, truncated, info = env.step(actions)

    for _ in range(3):  # compile, capture and settle
        loop()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loop()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return num_envs * steps / statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output folder")
    ap.add_argument("--parts", nargs="+", default=["loop", "train"], choices=["loop", "train"])
    ap.add_argument("--num-envs", nargs="+", type=int, default=[8192, 65536, 262144, 1048576])
    ap.add_argument("--steps", type=int, default=100, help="loop iterations per timed call")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--warm-runs", type=int, default=2, help="warm runs of nitro train cartpole")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs a CUDA device")
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name()
    result = {"device": device, "torch": torch.__version__, "triton": _triton_version(),
              "python": sys.version.split()[0], "loop": [], "train": []}
    path = args.out / f"first_hour_{re.sub(r'[^a-z0-9]+', '_', device.lower()).strip('_')}.json"
    if "loop" in args.parts:
        check_loop(8192, 300)
        for n in args.num_envs:
            row = {"num_envs": n, "steps": args.steps}
            for mode in ("auto", "eager"):
                row[f"{mode}_sps"] = loop_rate(n, mode, args.steps, args.repeats)
            result["loop"].append(row)
            print(f"loop {n}: auto {row['auto_sps']:.3g}, eager {row['eager_sps']:.3g} steps/s", flush=True)
            path.write_text(json.dumps(result, indent=1))
    if "train" in args.parts:
        result["train"] = train_runs(args.out, args.warm_runs)
        path.write_text(json.dumps(result, indent=1))
    print(f"\n{device}, torch {result['torch']}, triton {result['triton']} -> {path}")
    if result["loop"]:
        print(f"{'envs':>10} {'mode=auto':>12} {'eager':>12}   (README loop, env steps/s)")
        for r in result["loop"]:
            print(f"{r['num_envs']:>10,} {r['auto_sps']:>12.3g} {r['eager_sps']:>12.3g}")
    if result["train"]:
        print(f"{'nitro train cartpole':<22} {'wall s':>8} {'training s':>11} {'env steps':>11}")
        for r in result["train"]:
            print(f"{r['run']:<22} {r['wall_s']:>8.1f} {r['train_s']:>11.2f} {r['global_step']:>11,}")


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


if __name__ == "__main__":
    main()
