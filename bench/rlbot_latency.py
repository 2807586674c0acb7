"""Latency of an exported RLBot v5 bot on one CPU core: ``get_output``'s work per GamePacket (the
packet adapter, the policy graph on decision ticks, the held controls otherwise), with the graph in
onnxruntime (what ``nitro export --rlbot`` ships) and, for comparison, in TorchScript.

    python3 bench/rlbot_latency.py --out bench/results [--ticks 4800]

Bots: RLGym's DefaultObs padded to 3v3 (six car slots per decision) and GigaLearn's AdvancedObs
with action masks (1v1), both with the 256 x 3 ReLU MLP of the soccar preset (fresh weights:
latency does not depend on them), tick skip 8. Each plays ``--ticks`` consecutive 1v1 packets (120
per second of play; the states cycle through 64 random mid-game states, built by the env's random
state mutator and sent as `rlbot` GamePackets), so one call in eight is a decision. Checks first:
the TorchScript bot answers every packet exactly as the ONNX bot does. Times are per call
(wall time, and the calling thread's CPU time: the cost on a core of its own where other
processes share the machine), after 200 warm-up calls, with one intra-op thread in both runtimes;
medians and 99th percentiles over decision ticks and over the other ticks. Writes
``<out>/rlbot_latency_cpu.json`` (CPU, versions, sizes, results) and prints a table last. Runs
from the repository root; needs the ``rlbot`` extra (rlbot, onnxruntime) and the soccar meshes are
not needed (no physics is stepped).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
import rlbot.version  # noqa: E402
import torch  # noqa: E402
from rlbot import flat  # noqa: E402

from nitro.core import rng  # noqa: E402
from nitro.deploy import game_packet as packets  # noqa: E402
from nitro.deploy import graph, runtime  # noqa: E402
from nitro.deploy.export import write_bot  # noqa: E402
from nitro.envs.soccar.rl import Soccar, SoccarParams  # noqa: E402
from nitro.envs.soccar.rl.action_parsers import LookupTableAction  # noqa: E402
from nitro.envs.soccar.rl.obs_builders import GigaLearnAdvancedObs  # noqa: E402
from nitro.envs.soccar.rl.state_mutators import RandomStateMutator  # noqa: E402
from nitro.train.config import PolicyConfig  # noqa: E402
from nitro.train.policy import ActorCritic  # noqa: E402

BOTS = {
    "rlgym_default_3v3_slots": SoccarParams(),
    "gigalearn_advanced_masked_1v1": SoccarParams(obs=GigaLearnAdvancedObs(), action=LookupTableAction(masks=True)),
}
POLICY = PolicyConfig(hidden=[256, 256, 256], activation="relu")
STATES, WARMUP = 64, 200


class TorchScriptAgent(runtime.Agent):
    """The shipped Agent with its graph run by TorchScript instead of onnxruntime."""

    def __init__(self, folder: Path, pads, index: int, traced: torch.jit.ScriptModule, names: list[str]):
        super().__init__(folder, pads, index)
        self.traced, self.names = traced, names

    def decide(self, state: dict[str, np.ndarray], slot: int) -> None:
        prev_action = np.zeros((1, self.adapter.num_cars, 8), np.float32)
        prev_action[0, slot] = self.current
        feed = {**state, "prev_action": prev_action}
        with torch.no_grad():
            obs, action, controls, value = self.traced(*(torch.from_numpy(np.asarray(feed[n])) for n in self.names))
        self.previous, self.current = self.current, controls[slot].numpy()
        self.obs, self.action, self.value = obs[slot].numpy(), action[slot].numpy(), value[slot].numpy()


def packet_stream(ticks: int) -> list[flat.GamePacket]:
    """``ticks`` consecutive 1v1 packets (frames 0, 1, ...) cycling through random mid-game states."""
    env = Soccar(SoccarParams(mutator=RandomStateMutator()))
    state = env.reset(rng.env_keys(rng.key(0, "cpu"), STATES), STATES, "cpu")
    cycle = [packets.game_packet(state, env=e) for e in range(STATES)]
    out = []
    for frame in range(ticks):
        p = cycle[frame % STATES]
        info = flat.MatchInfo(seconds_elapsed=frame / 120, match_phase=flat.MatchPhase.Active, frame_num=frame,
                              world_gravity_z=-650.0, game_speed=1.0)
        out.append(packets.on_the_wire(flat.GamePacket(players=p.players, boost_pads=p.boost_pads, balls=p.balls,
                                                       match_info=info, teams=p.teams)))
    return out


def stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median_ms": statistics.median(xs), "p99_ms": xs[int(0.99 * (len(xs) - 1))],
            "mean_ms": statistics.fmean(xs), "calls": len(xs)}


def timed(agent: runtime.Agent, stream: list[flat.GamePacket], tick_skip: int) -> tuple[dict, list]:
    """Per-call wall time and the calling thread's CPU time (what the call costs a core of its own,
    without waiting for a busy machine's other processes), split into decision and other ticks."""
    controls, times = [], {"decision": ([], []), "other": ([], [])}
    for i, packet in enumerate(stream):
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        c = agent.step(packet)
        cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
        controls.append(c.copy())
        if i >= WARMUP:
            walls, cpus = times["decision" if i % tick_skip == 0 else "other"]
            walls.append(wall / 1e6)
            cpus.append(cpu / 1e6)
    return {kind: {"wall": stats(w), "thread_cpu": stats(c)} for kind, (w, c) in times.items()}, controls


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--ticks", type=int, default=4800)
    args = parser.parse_args()
    torch.set_num_threads(1)
    stream = packet_stream(args.ticks)
    pads = [(p.location.x, p.location.y) for p in packets.field_info().boost_pads]
    results, rows = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for name, params in BOTS.items():
            torch.manual_seed(0)
            env = Soccar(params)
            policy = ActorCritic(env.observation_space.shape[0], env.action_space, POLICY).eval()
            folder = write_bot(Path(tmp) / name, env, policy, None, name, "bench/rlbot_latency.py")
            blue, orange = graph.car_slots(env)
            module = graph.PolicyGraph(env, policy, None, blue, orange).eval()
            example = graph.example_inputs(module)
            with torch.no_grad():
                traced = torch.jit.trace(module, tuple(example[n] for n in module.names), check_trace=False)
            onnx_times, onnx_controls = timed(runtime.Agent(folder, pads, 0), stream, env.params.tick_skip)
            ts_agent = TorchScriptAgent(folder, pads, 0, traced, module.names)
            ts_times, ts_controls = timed(ts_agent, stream, env.params.tick_skip)
            same = all(np.array_equal(a, b) for a, b in zip(onnx_controls, ts_controls))
            if not same:
                raise SystemExit(f"{name}: TorchScript's controls differ from onnxruntime's")
            results[name] = {"car_slots": blue + orange, "obs_size": env.observation_space.shape[0],
                             "onnxruntime": onnx_times, "torchscript": ts_times, "same_controls": same}
            for runtime_name, t in (("onnxruntime", onnx_times), ("torchscript", ts_times)):
                cells = [t[kind][clock][q] for kind in ("decision", "other") for clock in ("thread_cpu", "wall")
                         for q in ("median_ms", "p99_ms")]
                rows.append((name, runtime_name, *cells))
    record = {
        "bench": "rlbot_latency", "device": cpu_name(), "threads": 1, "python": platform.python_version(),
        "torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "rlbot": rlbot.version.__version__,
        "numpy": np.__version__, "policy": {"hidden": POLICY.hidden, "activation": POLICY.activation},
        "ticks": args.ticks, "warmup_calls": WARMUP, "tick_skip": 8, "load_average": os.getloadavg()[0],
        "cores": os.cpu_count(), "results": results,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rlbot_latency_cpu.json").write_text(json.dumps(record, indent=1))
    print(f"{record['device']}, 1 thread, load average {record['load_average']}; ms per get_output "
          f"(a 120 Hz tick is 8.33 ms), thread CPU time and wall time, median / p99")
    print(f"{'bot':<31}{'runtime':<12}{'decision cpu':>16}{'decision wall':>17}{'other cpu':>16}{'other wall':>17}")
    for name, rt, *v in rows:
        print(f"{name:<31}{rt:<12}" + "".join(f"{v[k]:>8.3f} /{v[k + 1]:>7.3f}" for k in range(0, 8, 2)))


if __name__ == "__main__":
    main()
