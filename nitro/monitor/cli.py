"""``nitro monitor | doctor | plot | replay``: watching runs, machines and games."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nitro.monitor import VIEWERS, require


def add_commands(sub) -> None:
    """Register the watching subcommands on the ``nitro`` parser."""
    p = sub.add_parser("monitor", help="live terminal dashboard of a run (a separate process; q detaches)",
                       description="Watch a run directory: return, SPS, losses, KL and entropy as sparklines and a "
                                   "table of recent updates. It only reads the run's files, so it can attach and "
                                   "detach at any time and keeps working when the trainer dies.")
    p.add_argument("run", nargs="?", help="run directory (or --latest)")
    p.add_argument("--latest", action="store_true", help="the run under --dir that changed last")
    p.add_argument("--dir", default="runs", help="where --latest looks for runs (default: runs)")
    p.add_argument("--interval", type=float, default=0.5, help="seconds between polls of the run (default 0.5)")
    p.add_argument("--once", action="store_true", help="print a plain-text snapshot and exit (no terminal UI)")
    p.add_argument("--wait", action="store_true", help="wait for RUN to be created (nitro train --monitor uses it)")
    p.set_defaults(fn=_monitor)

    p = sub.add_parser("plot", help="learning-curve PNGs and an HTML page of one or more runs",
                       description="Return vs env steps and vs wall time, SPS and losses, one line per run.")
    p.add_argument("runs", nargs="+", help="run directories to draw (and compare)")
    p.add_argument("--out", help="output folder (default: RUN/plots of the first run)")
    p.set_defaults(fn=_plot)

    p = sub.add_parser("doctor", help="this machine: versions, GPU, soccar kernels, env/policy/PPO speed, a num_envs "
                                      "suggestion")
    p.add_argument("preset", nargs="?", default="cartpole", help="preset or env id to measure (default cartpole)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for bug reports)")
    p.add_argument("--out", help="also write the JSON report to this file")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (about a third of the time)")
    p.set_defaults(fn=_doctor)

    p = sub.add_parser("replay", help="a soccar replay file as a web page, or streamed to a live viewer",
                       description="Write a self-contained web page of a replay (.npz from nitro eval --replay or "
                                   "training with monitor.replay_every), or play it into RLViser / RocketSimVis.")
    p.add_argument("file", help="replay file (.npz)")
    p.add_argument("--html", metavar="OUT", help="write the replay page to OUT (an .html file)")
    p.add_argument("--render", choices=VIEWERS, help="play the replay into a running viewer at game speed")
    p.add_argument("--env", type=int, default=0, help="which recorded env --render plays (default 0)")
    p.add_argument("--speed", type=float, default=1.0, help="--render playback speed (default 1)")
    p.add_argument("--title", help="page title (default: the file name)")
    p.set_defaults(fn=_replay)


def _monitor(args) -> int:
    from nitro.monitor.runs import find_run, latest_run

    if args.latest == bool(args.run):
        raise ValueError("give a run directory or --latest (not both), e.g. nitro monitor runs/cartpole-... "
                         "or nitro monitor --latest")
    if args.interval <= 0:
        raise ValueError(f"--interval must be > 0 seconds, got {args.interval}")
    if args.latest:
        run = latest_run(args.dir)
    elif args.wait:
        run = Path(args.run)  # the dashboard shows "waiting" until the trainer creates it
    else:
        run = find_run(args.run)
    if args.once:
        from nitro.monitor.view import snapshot

        print(snapshot(run))
        return 0
    if not sys.stdout.isatty():
        raise ValueError("nitro monitor draws in a terminal; this output is not one: use --once for a plain snapshot")
    require("textual", "the dashboard (nitro monitor; --once prints without it)")
    from nitro.monitor.dashboard import Dashboard

    Dashboard(run, args.interval).run()
    print(f"detached from {run}; watch again with: nitro monitor {run}")
    return 0


def _plot(args) -> int:
    require("matplotlib", "nitro plot")
    from nitro.monitor import plot
    from nitro.monitor.runs import find_run

    runs = [find_run(r) for r in args.runs]
    files = plot.write(runs, Path(args.out) if args.out else runs[0] / "plots")
    print(f"wrote {', '.join(p.name for p in files.values())} to {files['index'].parent}")
    return 0


def _doctor(args) -> int:
    from nitro.monitor import doctor

    report = doctor.run(args.preset, args.device, args.quick,
                        log=(lambda line: print(f"measuring: {line}", file=sys.stderr, flush=True)))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1) if args.json else doctor.text(report))
    return 0


def _replay(args) -> int:
    from nitro.monitor import replay as R

    if not args.html and not args.render:
        raise ValueError("say what to do with the replay: --html OUT.html and/or --render rlviser|rocketsimvis")
    replay = R.load(args.file)
    if args.html:
        from nitro.monitor.replay_page import write

        out = write(replay, args.html, args.title or Path(args.file).stem)
        print(f"wrote {out} ({replay.num_envs} envs x {replay.num_frames} frames, {replay.num_cars} cars)")
    if args.render:
        from nitro.monitor.live import LiveView

        live = LiveView(args.render, env=args.env, block=True, speed=args.speed)
        try:
            live.feed(replay)
            live.wait()
        finally:
            live.close()
        print(json.dumps({"viewer": args.render, "packets": live.sent}))
    return 0

