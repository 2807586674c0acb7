"""Does watching a run slow it down? Training SPS with and without `nitro monitor` attached, on a GPU,
and `nitro doctor --json` of the machine.

    python3 bench/monitor_gpu.py OUT_DIR [--seconds 84] [--phase 7] [--skip-doctor]

One trainer (the cartpole preset as it runs on CUDA: 16,384 envs x 16 steps, bf16, CUDA graph; no
compile, no checkpoints; a log every ``--log-every`` = 50 updates) trains for the whole measurement. Meanwhile a
dashboard process is attached and detached in turns, ``--phase`` seconds each: the real terminal UI
(`nitro monitor RUN` in a pseudo-terminal, its screen drained) where textual is installed, else a
process polling the run as the dashboard does (`nitro.monitor.view.snapshot` every 0.5 s). Each log's
SPS (env steps over the log interval, host clock) is assigned to the phase that holds its whole
interval; the medians of the attached and detached logs are compared (goal: within 2%). Interleaving
the phases in one process cancels slow drifts (clocks, temperature) that separate runs would see.

Correctness checks: the trainer's collect/learn split, timed by CUDA events captured inside the CUDA
graph, is present and positive, and fits inside its update; every log is accounted for.
Writes OUT_DIR/monitor_overhead_<gpu>.json and OUT_DIR/doctor_<gpu>.json; prints a table last.
Needs a CUDA GPU; about 4 minutes (doctor ~1.5, training ~2.5).
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import platform
import pty
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import yaml  # noqa: E402

from nitro.monitor.runs import read_metrics, read_status  # noqa: E402

SNAPSHOT_LOOP = ("import sys, time; from pathlib import Path; from nitro.monitor.view import snapshot\n"
                 "while True:\n    snapshot(Path(sys.argv[1])); time.sleep(0.5)\n")


def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


class Monitor:
    """A dashboard process watching ``run``: the terminal UI in a pty, or the polling loop."""

    def __init__(self, run: Path, tui: bool):
        self.tui = tui
        if tui:
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
            self.proc = subprocess.Popen([sys.executable, "-m", "nitro.cli", "monitor", str(run)], stdin=slave,
                                         stdout=slave, stderr=slave, env={**env(), "TERM": "xterm-256color"},
                                         start_new_session=True)
            os.close(slave)
            self.master = master
            self.drain = threading.Thread(target=self._drain, daemon=True)
            self.drain.start()
        else:
            self.proc = subprocess.Popen([sys.executable, "-c", SNAPSHOT_LOOP, str(run)], env=env(),
                                         stdout=subprocess.DEVNULL)

    def _drain(self) -> None:
        while True:
            try:
                if not os.read(self.master, 65536):
                    return
            except OSError:
                return

    def close(self) -> None:
        if self.tui:
            os.write(self.master, b"q")  # detach as a user would
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.tui:
            os.close(self.master)


def doctor(out: Path, slug: str) -> dict:
    path = out / f"doctor_{slug}.json"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nitro.cli", "doctor", "--json", "--out", str(path)], env=env(),
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    report = json.loads(path.read_text())
    report["doctor_seconds"] = time.perf_counter() - t0
    path.write_text(json.dumps(report, indent=1))
    return report


def measure(out: Path, seconds: float, phase: float, tui: bool, log_every: int, overrides: list[str]) -> dict:
    runs = out / "runs"
    run = runs / f"bench-{int(time.time())}"
    trainer = subprocess.Popen(
        [sys.executable, "-m", "nitro.cli", "train", "cartpole", f"run.dir={runs}", f"run.name={run.name}",
         "ppo.total_steps=1000000000000", "ppo.target_return=none", f"run.log_every={log_every}",
         "run.checkpoint_every=1000000000", "run.checkpoint_seconds=0", "run.compile=false",
         "run.tensorboard=false", "run.console=false", *overrides], env=env(), stdout=subprocess.DEVNULL,
        stderr=(out / "trainer.log").open("w"))
    try:
        deadline = time.time() + 300
        while (read_status(run) or {}).get("update", 0) < 2 * log_every:  # set up and past its first logs
            if trainer.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the trainer did not start (exit code {trainer.poll()})")
            time.sleep(0.5)
        phases = []
        for i in range(int(seconds // phase)):
            attached = i % 2 == 1
            start = time.time()
            monitor = Monitor(run, tui) if attached else None
            time.sleep(phase)
            if monitor is not None:
                monitor.close()
            phases.append({"attached": attached, "start": start, "end": time.time()})
    finally:
        trainer.send_signal(signal.SIGINT)
        try:
            trainer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            trainer.kill()
    rows = read_metrics(run)
    status = read_status(run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    steps = config["env"]["num_envs"] * config["ppo"]["num_steps"]
    for prev, row in zip(rows, rows[1:]):
        row["interval"] = (prev["time"], row["time"])
    by_phase = []
    for p in phases:
        inside = [r for r in rows[1:] if p["start"] <= r["interval"][0] and r["interval"][1] <= p["end"]]
        by_phase.append({**p, "logs": len(inside), "median_sps": statistics.median(r["perf/sps"] for r in inside)
                         if inside else None, "sps": [r["perf/sps"] for r in inside]})
    updates = [r["update"] for r in rows]
    checks = {
        "phase_split_present": all(r.get("perf/collect_seconds", 0) > 0 and r.get("perf/learn_seconds", 0) > 0
                                   for r in rows),
        # one iteration's split against the mean update time of its log interval (which also holds the
        # log's sync): graph replays vary by a few percent, so 1.5x only fails a split that is wrong
        "phase_split_fits_an_update": all(
            r["perf/collect_seconds"] + r["perf/learn_seconds"] <= 1.5 * steps / r["perf/sps"]
            for r in rows if "perf/collect_seconds" in r),
        "every_log_once": updates == sorted(set(updates)) and all(u % log_every == 0 for u in updates),
        "trainer_state": status.get("state") if status else None,
    }
    for attached in (False, True):
        if not any(p["sps"] for p in by_phase if p["attached"] == attached):
            raise RuntimeError(f"no log interval fits inside any {'attached' if attached else 'detached'} phase "
                               f"({len(rows)} logs in all): raise --phase or lower --log-every")
    sps = {k: statistics.median(s for p in by_phase if p["attached"] == k for s in p["sps"]) for k in (False, True)}
    return {"run": str(run), "num_envs": config["env"]["num_envs"], "num_steps": config["ppo"]["num_steps"],
            "precision": config["run"]["precision"], "rows": len(rows), "phases": by_phase, "checks": checks,
            "median_sps_detached": sps[False], "median_sps_attached": sps[True],
            "attached_over_detached": sps[True] / sps[False],
            "collect_seconds_median": statistics.median(r["perf/collect_seconds"] for r in rows if "perf/collect_seconds" in r),
            "learn_seconds_median": statistics.median(r["perf/learn_seconds"] for r in rows if "perf/learn_seconds" in r)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=84.0, help="length of the alternating phases in all")
    parser.add_argument("--phase", type=float, default=7.0, help="seconds per attached or detached phase")
    parser.add_argument("--skip-doctor", action="store_true")
    parser.add_argument("--log-every", type=int, default=50, help="updates between the trainer's logs")
    parser.add_argument("--cpu-smoke", action="store_true", help="check this script on a CPU (64 envs; no claim)")
    args = parser.parse_args()
    overrides = ["run.device=cpu", "env.num_envs=64"] if args.cpu_smoke else []
    if not (torch.cuda.is_available() or args.cpu_smoke):
        print("this benchmark needs a CUDA GPU")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    name = "cpu-smoke" if args.cpu_smoke else torch.cuda.get_device_name()
    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")[:40]
    tui = importlib.util.find_spec("textual") is not None
    record = {"benchmark": "monitor_overhead", "device_name": name, "torch": torch.__version__,
              "cuda": torch.version.cuda, "python": platform.python_version(),
              "triton": importlib.util.find_spec("triton") and __import__("triton").__version__,
              "preset": "cartpole", "log_every": args.log_every,
              "phase_seconds": args.phase, "monitor": "textual dashboard in a pty" if tui else
              "snapshot polling loop (textual is not installed)"}
    if not args.skip_doctor:
        report = doctor(args.out, slug)
        record["doctor_seconds"] = report["doctor_seconds"]
    record.update(measure(args.out, args.seconds, args.phase, tui, args.log_every, overrides))
    path = args.out / f"monitor_overhead_{slug}.json"
    path.write_text(json.dumps(record, indent=1))
    ok = abs(record["attached_over_detached"] - 1) <= 0.02 and record["checks"]["phase_split_present"] and \
        record["checks"]["phase_split_fits_an_update"]
    print(f"wrote {path}")
    print(f"{'phase':>10} {'logs':>5} {'median SPS':>12}")
    for p in record["phases"]:
        print(f"{'attached' if p['attached'] else 'detached':>10} {p['logs']:>5} {p['median_sps'] or 0:>12.4g}")
    print(f"device {name}; monitor: {record['monitor']}")
    print(f"median SPS detached {record['median_sps_detached']:.4g}, attached {record['median_sps_attached']:.4g}: "
          f"ratio {record['attached_over_detached']:.4f} ({'within' if ok else 'NOT within'} 2%; checks "
          f"{record['checks']})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
