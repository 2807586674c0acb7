"""Soccar RL layer on one GPU: observation building (RLGym v2 DefaultObs, GigaLearn DefaultObs and
AdvancedObs) and the rest of a step's RL work (action parsing with GigaLearn's masks, GigaLearn's
example rewards, done conditions), in agents per second, from 4k to 1M agents.

    python3 bench/soccar_rl_gpu.py --out bench/results [--budget 200] [--meshes DIR] [--env-envs 4096]
                                   [--train-envs 4096]

Random states (every car field over its range, 20 % of cars demolished, 10 % benched, pads taken
with timers; 4096 random envs tiled to the batch) in 1v1 and 3v3 layouts. Checks first: each builder on the GPU against the same builder on the CPU (same
float32 ops; <= 1e-5 apart), and one call of each under ``torch.cuda.set_sync_debug_mode("error")``
(no host syncs). Then eager timings at every size and, while the budget lasts, ``torch.compile``d
builders at the largest 1v1 batch (the compile is part of the warm-up). Times are CUDA-event medians of 10 calls after
3 warm-up calls. A short stage also steps Soccar-v0 itself (1v1, eager, with the cars' physics; the
meshes must be present) and records whether its step syncs with the host. The training stage runs
``nitro train soccar``'s trainer (1v1, tick skip 8, 256 x 3 MLPs, ``--train-envs`` arenas, 32 steps per
update) and times whole PPO iterations (collection + update, eager, then captured in a CUDA graph)
in agent-steps/s, split into physics (the ticks), observations/rewards/conditions/resets (the rest
of an env step), policy inference and the update, each timed on its own at the same batch. Writes
``<out>/soccar_rl_gpu.json`` (device, versions, sizes, results, errors) and prints a table last. Runs from the repository root with no installs (the package is read from the
tree); ``--device cpu`` dry-runs the code paths at small sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from nitro.core import rng, tree  # noqa: E402
from nitro.envs.soccar.rl import done_conditions as D  # noqa: E402
from nitro.envs.soccar.rl.action_parsers import LookupTableAction  # noqa: E402
from nitro.envs.soccar.rl.env import GIGALEARN_REWARD, Soccar, SoccarParams  # noqa: E402
from nitro.envs.soccar.rl.obs_builders import DefaultObs, GigaLearnAdvancedObs, GigaLearnDefaultObs  # noqa: E402
from tests.envs.soccar.rl.states import random_state  # noqa: E402

AGENTS = (1 << 12, 1 << 16, 1 << 18, 1 << 20)
TEAMS = ((1, 1), (3, 3))
BUILDERS = {"rlgym_default": DefaultObs(), "giga_default": GigaLearnDefaultObs(), "giga_advanced": GigaLearnAdvancedObs()}
EXAMPLE_REWARD = GIGALEARN_REWARD  # GigaLearn's ExampleMain rewards (the touch-based ones read the touch events)
DONE = D.AnyCondition(D.GoalCondition(), D.NoTouchTimeoutCondition(10), D.TimeoutCondition(300))
PARSER = LookupTableAction(masks=True)
WARMUP, REPEATS = 3, 10
FEW = (1, 3)  # warm-up and timed calls of whole PPO iterations (long)


def step_extras(before, after, actions):
    """The RL work of a step besides the observation: controls, masks, rewards, done flags."""
    return PARSER(actions, after), PARSER.action_mask(after), EXAMPLE_REWARD(before, after), DONE(before, after)


def timed(fn, device: str, warmup: int = WARMUP, repeats: int = REPEATS) -> float:
    """Median seconds of ``fn()`` after ``warmup`` calls (CUDA events on the GPU)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def states(num_envs: int, blue: int, orange: int, device: str):
    """A random step (before, after) of ``num_envs`` envs: 4096 random envs, tiled on the device."""
    base = min(num_envs, 4096)
    copies = -(-num_envs // base)

    def tile(state):
        return tree.tree_map(lambda x: x.repeat(copies, *[1] * (x.dim() - 1))[:num_envs], tree.to(state, device))

    return tile(random_state(base, blue, orange, seed=1)), tile(random_state(base, blue, orange, seed=2, bench=0.1))


def checks(device: str, results: dict) -> None:
    """GPU vs CPU for each builder and the step extras; no host syncs on CUDA."""
    cpu_before, cpu_after = states(64, 2, 2, "cpu")
    before, after = tree.to(cpu_before, device), tree.to(cpu_after, device)
    actions = torch.randint(0, 90, (64 * 4,), generator=torch.Generator().manual_seed(0))
    device_actions = actions.to(device)  # copied once, before the sync-checked calls (a host copy syncs)
    for name, builder in BUILDERS.items():
        diff = (builder(after).cpu() - builder(cpu_after)).abs().max().item()
        results["checks"][f"{name}_max_abs_diff"] = diff
        assert diff <= 1e-5, f"{name}: GPU and CPU differ by {diff}"
    extras = step_extras(before, after, device_actions)
    reference = step_extras(cpu_before, cpu_after, actions)
    results["checks"]["extras_max_abs_diff"] = max(
        (a.cpu().float() - b.float()).abs().max().item() for a, b in zip(extras, reference))
    assert results["checks"]["extras_max_abs_diff"] <= 1e-4  # rewards weighted up to 150: 1e-4 absolute
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for builder in BUILDERS.values():
                builder(after)
            step_extras(before, after, device_actions)
            torch.cuda.synchronize()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        results["checks"]["no_host_syncs"] = True


def env_steps(device: str, num_envs: int, meshes, results: dict) -> None:
    """Soccar-v0 (1v1, GigaLearn AdvancedObs, masks, the example rewards) stepped eagerly with the cars'
    physics: env-steps/s and agent-steps/s, and whether a step syncs with the host (recorded, since
    the physics stages are still being ported)."""
    env = Soccar(SoccarParams(obs=GigaLearnAdvancedObs(), action=PARSER, reward=EXAMPLE_REWARD, meshes=meshes))
    key = rng.env_keys(rng.key(0, device), num_envs)
    state = env.reset(key, num_envs, device)
    actions = torch.randint(0, 90, (num_envs * 2,), device=device)
    holder = {"state": state}

    def step():
        holder["state"] = env.step(holder["state"], actions, key)[0]

    seconds = timed(step, device)
    results["env"] = {"envs": num_envs, "agents": num_envs * 2, "tick_skip": 8, "median_ms": seconds * 1e3,
                      "env_steps_per_s": num_envs / seconds, "agent_steps_per_s": 2 * num_envs / seconds}
    print(f"env       Soccar-v0 1v1 {num_envs} envs {seconds * 1e3:.3f} ms/step "
          f"{2 * num_envs / seconds:.3e} agent-steps/s", flush=True)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            env.step(env.reset(key, num_envs, device), actions, key)
            torch.cuda.synchronize()
            results["env"]["no_host_syncs"] = True
        except RuntimeError as e:
            results["env"]["no_host_syncs"] = False
            results["env"]["sync"] = traceback.format_exc(limit=-6)[-3000:]
            print(f"env       a step syncs with the host: {e}", flush=True)
        finally:
            torch.cuda.set_sync_debug_mode("default")


def training(device: str, num_envs: int, results: dict) -> None:
    """Collection + update of the soccar preset's trainer, and its split (see the module docstring)."""
    from nitro.core.env import autoreset_step
    from nitro.train import config as C
    from nitro.train.ppo import Trainer

    out = results["training"] = {"envs": num_envs}
    for graph in ((False, True) if device == "cuda" else (False,)):
        dry = [] if device == "cuda" else ["ppo.num_steps=2", "ppo.minibatches=2"]  # a CPU dry run: short updates
        cfg = C.load("soccar", [f"env.num_envs={num_envs}", f"run.device={device}", "run.console=false",
                                "run.tensorboard=false", "run.compile=false", f"run.graph={str(graph).lower()}", *dry])
        trainer = Trainer(cfg)
        agents = num_envs * trainer.env.num_agents
        per_iteration = agents * trainer.T
        if graph:
            trainer._capture()
            seconds = timed(trainer.graph.replay, device, *FEW)
        else:
            seconds = timed(trainer.iteration, device, *FEW)
        name = "graph" if graph else "eager"
        out[name] = {"iteration_ms": seconds * 1e3, "agent_steps_per_s": per_iteration / seconds,
                     "agents": agents, "steps_per_update": trainer.T}
        print(f"train     soccar 1v1 {name} {num_envs} envs: {seconds * 1e3:.1f} ms per {trainer.T}-step update, "
              f"{per_iteration / seconds:.3e} agent-steps/s", flush=True)
        if graph:
            break
        env, c = trainer.env, trainer.carry
        state, key = c.env_state, c.key
        action = torch.randint(0, 90, (agents,), device=device)  # any lookup actions: the timings do not depend on them
        controls = env.params.action(action, state)
        obs = trainer._normalize(c.obs)
        parts = {
            "physics": lambda: env.physics(state, controls),
            "env_step": lambda: autoreset_step(env, state, action, key),
            "inference": lambda: trainer.policy(obs, c.hidden, c.first),
            "update": lambda: (trainer.compute_advantages(), trainer.update_normalizers(), trainer.learn()),
        }
        ms = {k: timed(fn, device, *FEW) * 1e3 for k, fn in parts.items()}
        iteration = seconds * 1e3
        split = {"physics": trainer.T * ms["physics"], "obs_rewards_resets": trainer.T * (ms["env_step"] - ms["physics"]),
                 "inference": trainer.T * ms["inference"], "update": ms["update"]}
        split["other"] = iteration - sum(split.values())
        out["eager"]["parts_ms"] = ms
        out["eager"]["split_ms"] = split
        out["eager"]["split_share"] = {k: v / iteration for k, v in split.items()}
        print("train     split per update: " + ", ".join(f"{k} {v:.1f} ms ({v / iteration:.0%})" for k, v in split.items()),
              flush=True)
        del trainer
        if device == "cuda":
            torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--budget", type=float, default=200.0, help="seconds; later measurements are skipped")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--meshes", default=None, help="soccar collision meshes (default: $NITRO_MESHES or rlgym)")
    parser.add_argument("--env-envs", type=int, default=4096, help="envs of the Soccar-v0 stage")
    parser.add_argument("--train-envs", type=int, default=4096, help="arenas of the training stage")
    args = parser.parse_args()
    t0 = time.perf_counter()
    device = args.device
    sizes = AGENTS if device == "cuda" else (1 << 8, 1 << 10)
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    results = {
        "bench": "soccar_rl_gpu", "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
        "torch": torch.__version__, "triton": triton_version, "cuda": torch.version.cuda, "python": platform.python_version(),
        "agents": list(sizes), "teams": [f"{b}v{o}" for b, o in TEAMS], "warmup": WARMUP, "repeats": REPEATS,
        "checks": {}, "eager": [], "compiled": [], "errors": [], "skipped": [],
    }  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "soccar_rl_gpu.json"

    def save():
        path.write_text(json.dumps(results, indent=1))

    try:
        checks(device, results)
    except Exception:
        results["errors"].append({"stage": "checks", "error": traceback.format_exc()})
    save()
    try:
        env_steps(device, args.env_envs if device == "cuda" else 8, args.meshes, results)
    except Exception:
        results["errors"].append({"stage": "env", "error": traceback.format_exc()})
    save()
    try:
        if args.meshes:
            os.environ["NITRO_MESHES"] = args.meshes  # the trainer's env finds them there
        training(device, args.train_envs if device == "cuda" else 2, results)
    except Exception:
        results["errors"].append({"stage": "training", "error": traceback.format_exc()})
        if device == "cuda":
            torch.cuda.empty_cache()
    save()

    def measure(kind: str, team, agents: int, name: str, fn) -> None:
        if time.perf_counter() - t0 > args.budget:
            results["skipped"].append(f"{kind} {name} {team[0]}v{team[1]} {agents}")
            return
        try:
            seconds = timed(fn, device)
            row = {"builder": name, "team": f"{team[0]}v{team[1]}", "agents": agents, "median_ms": seconds * 1e3,
                   "agents_per_s": agents / seconds}
            results[kind].append(row)
            print(f"{kind:9s} {name:14s} {row['team']} {agents:>8d} agents {seconds * 1e3:9.3f} ms "
                  f"{row['agents_per_s']:.3e} agents/s", flush=True)
        except Exception:
            results["errors"].append({"stage": f"{kind} {name} {team} {agents}", "error": traceback.format_exc()})
            if device == "cuda":
                torch.cuda.empty_cache()
        save()

    for team in TEAMS:
        for size in sizes:
            before, after = states(size // (team[0] + team[1]), *team, device)
            agents = after.num_envs * after.num_cars
            actions = torch.randint(0, 90, (agents,), device=device)
            for name, builder in BUILDERS.items():
                measure("eager", team, agents, name, lambda: builder(after))
            measure("eager", team, agents, "step_extras", lambda: step_extras(before, after, actions))
            if team == (1, 1) and size == sizes[-1]:  # one compile per builder, at the largest batch
                for name, builder in BUILDERS.items():
                    measure("compiled", team, agents, name, lambda fn=torch.compile(builder): fn(after))
            del before, after, actions
            if device == "cuda":
                torch.cuda.empty_cache()
    results["seconds"] = time.perf_counter() - t0
    save()
    print(f"\n{'kind':9s} {'builder':14s} team {'agents':>8s} {'ms':>9s} {'agents/s':>10s}")
    for kind in ("eager", "compiled"):
        for r in results[kind]:
            print(f"{kind:9s} {r['builder']:14s} {r['team']} {r['agents']:>8d} {r['median_ms']:9.3f} "
                  f"{r['agents_per_s']:10.3e}")
    print(f"env: {results.get('env')}")
    print(f"training: {results.get('training')}")
    print(f"checks: {results['checks']}; errors: {len(results['errors'])}; skipped: {len(results['skipped'])}; "
          f"{results['seconds']:.0f} s; wrote {path}")


if __name__ == "__main__":
    main()
