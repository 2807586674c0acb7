"""The ``nitro`` command: envs | bench | train | eval | export | monitor | doctor | plot | replay."""

from __future__ import annotations

import argparse
import os
import sys


def _cmd_envs(args) -> int:
    from rich.console import Console
    from rich.table import Table

    import nitro
    from nitro.core.fields import describe

    table = Table(title="registered envs")
    for col in ("id", "aliases", "observation space", "action space"):
        table.add_column(col)
    for s in nitro.registered():
        try:
            env = nitro.make_env(s.id)
            obs, act = _space_str(env.observation_space), _space_str(env.action_space)
        except Exception as e:  # an env whose optional dependency is missing still gets listed
            obs, act = f"unavailable: {e}", ""
        table.add_row(s.id, ", ".join(s.aliases), obs, act)
        if args.params and "unavailable" not in obs:
            for name, value, doc in describe(env.params):
                table.add_row("", f"  {name}={value}", doc, "")
    Console().print(table)
    return 0


def _space_str(space) -> str:
    from nitro.core.spaces import Box, Discrete, MultiDiscrete

    if isinstance(space, Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, MultiDiscrete):
        return f"MultiDiscrete({list(space.nvec)})"
    if isinstance(space, Box):
        return f"Box{list(space.shape)} [{min(space.low):.3g}, {max(space.high):.3g}]"
    return repr(space)


def _cmd_bench(args) -> int:
    import torch

    from nitro import bench
    from nitro.core.registry import spec
    from nitro.core.vector import default_device

    env_id = spec(args.env).id  # unknown ids fail here, with the list of known ones
    device = args.device or str(default_device())
    modes = args.mode or (["graph"] if args.graph else ["compile"] if args.compile else ["eager"])
    if "graph" in modes and torch.device(device).type != "cuda":
        raise SystemExit("error: --graph/--mode graph needs a CUDA device; use --compile on CPU")
    out = args.out
    if out is None and not args.no_save:
        name = bench.environment_info(device)["device_name"].lower()
        slug = "".join(c if c.isalnum() else "-" for c in name).strip("-")[:40] or "cpu"
        out = f"bench/results/{env_id.lower()}_{slug}.json"
    bench.run(env_id, args.num_envs, args.steps, device, modes, args.repeats, out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nitro", description="GPU-resident reinforcement learning.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list the registered envs and their spaces")
    p.add_argument("--params", action="store_true", help="also list each env's parameters")
    p.set_defaults(fn=_cmd_envs)

    p = sub.add_parser("bench", help="raw env steps/s with random actions")
    p.add_argument("env")
    p.add_argument("--num-envs", type=int, nargs="+", default=[8192])
    p.add_argument("--steps", type=int, default=100, help="steps per timed call (captured together)")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--mode", nargs="+", choices=["eager", "compile", "graph"])
    p.add_argument("--compile", action="store_true", help="shorthand for --mode compile")
    p.add_argument("--graph", action="store_true", help="shorthand for --mode graph (CUDA)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=None, help="JSON path (default bench/results/<env>_<device>.json)")
    p.add_argument("--no-save", action="store_true")
    p.set_defaults(fn=_cmd_bench)

    from nitro.monitor import cli as monitor_cli
    from nitro.train import cli as train_cli

    train_cli.add_commands(sub)
    monitor_cli.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (KeyError, ValueError, TypeError, FileNotFoundError) as e:
        if os.environ.get("NITRO_DEBUG"):
            raise
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
