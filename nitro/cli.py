"""The ``nitro`` command: envs | bench | train | eval | export | monitor | doctor | plot | replay."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from nitro.core.errors import NitroError


def _cmd_envs(args) -> int:
    from rich.console import Console

    console = Console()
    for table in envs_tables(args.params):
        console.print(table)
    return 0


def envs_tables(params: bool) -> list:
    """The ``nitro envs`` tables: every registered env with its spaces, then the simulators driven
    through a Python API of their own; with ``params``, a table of each env's parameters. Cells are
    plain text, never rich markup, so bracketed text in docs and spaces shows as written."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    import nitro
    from nitro.core.fields import describe

    def table(title: str, columns: tuple[str, ...], wrap: str) -> Table:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for col in columns:
            # one column wraps (within words if need be), so the table fits 80 columns
            t.add_column(col, no_wrap=col != wrap, overflow="fold" if col == wrap else "ellipsis")
        return t

    def row(t: Table, *cells: str) -> None:
        t.add_row(*(Text(c) for c in cells))

    envs = table("registered envs: nitro.make(ID), nitro train ID", ("id", "alias", "observations", "actions"),
                 wrap="alias")
    param_tables = []
    for s in nitro.registered():
        try:
            env = nitro.make_env(s.id)
        except Exception as e:  # an env whose optional dependency is missing still gets listed
            row(envs, s.id, ", ".join(s.aliases), f"unavailable: {e}", "")
            continue
        row(envs, s.id, ", ".join(s.aliases), _space_str(env.observation_space), _space_str(env.action_space))
        if params:
            t = table(f"{s.id} parameters: nitro.make({s.id!r}, name=value), env.params.name=value",
                      ("name", "default", "meaning"), wrap="meaning")
            for name, value, doc in describe(env.params):
                row(t, name, value, doc)
            param_tables.append(t)
    simulators = [Text(f"{name}: {what}, through its own API: {api} ({_simulator_status(name)})")
                  for name, api, what in SIMULATORS]
    return [envs, *simulators, *param_tables]


SIMULATORS = [
    ("soccar", "from nitro.envs.soccar import Arena",
     "Rocket League soccar arenas (a RocketSim port) on the real collision meshes"),
]
"""Simulators with an API of their own rather than the env protocol: (name, how to use it, what it is)."""


def _simulator_status(name: str) -> str:
    if name == "soccar":
        from nitro.envs.soccar.arena_mesh.cmf import MESHES_PIP, MeshesNotFoundError, find_soccar_meshes

        try:
            find_soccar_meshes()
        except MeshesNotFoundError:
            return f"unavailable: the arena meshes are missing; {MESHES_PIP}"
    return "available"


def _space_str(space) -> str:
    from nitro.core.spaces import Box, Discrete, MultiDiscrete

    if isinstance(space, Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, MultiDiscrete):
        return f"MultiDiscrete({list(space.nvec)})"
    if isinstance(space, Box):
        # bounds as Box.of makes them (tuples), or as a Box(low, high, shape) made directly holds them
        low, high = (v if isinstance(v, (tuple, list)) else (v,) for v in (space.low, space.high))
        return f"Box{list(space.shape)} [{min(low):.3g}, {max(high):.3g}]"
    return repr(space)


def _cmd_bench(args) -> int:
    import torch

    from nitro import bench
    from nitro.core.registry import spec
    from nitro.core.vector import default_device
    from nitro.train.config import resolve_device

    env_id = spec(args.env).id  # unknown ids fail here, with the list of known ones
    device = str(resolve_device(args.device)) if args.device else str(default_device())
    modes = args.mode or (["graph"] if args.graph else ["compile"] if args.compile else ["eager"])
    if "graph" in modes and torch.device(device).type != "cuda":
        raise NitroError(f"--mode graph needs a CUDA device, this bench runs on {device}; use --mode eager "
                         f"compile")
    out = None
    if not args.no_save:
        out = Path(args.out) if args.out else bench.default_out(env_id, device)
        if args.out and out.exists():
            raise NitroError(f"--out {out} already exists; give a new file name (results are never "
                             f"overwritten) or remove it")
    bench.run(env_id, args.num_envs, args.steps, device, modes, args.repeats, out, unique=not args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from nitro.bench import DEFAULT_DIR

    parser = argparse.ArgumentParser(prog="nitro", description="GPU-resident reinforcement learning.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("envs", help="list the registered envs and their spaces",
                       description="List the registered envs with their observation and action spaces.")
    p.add_argument("--params", action="store_true", help="also list each env's parameters and their meaning")
    p.set_defaults(fn=_cmd_envs)

    p = sub.add_parser("bench", help="raw env steps/s with random actions",
                       description="Raw env steps per second with random legal actions (auto-reset included): "
                                   "the median of --repeats timed calls of --steps steps each, per size and "
                                   f"mode. Results go to a new JSON file in {DEFAULT_DIR}/ (or --out); earlier "
                                   "results are never overwritten.")
    p.add_argument("env", help="env id or alias (nitro envs lists them)")
    p.add_argument("--num-envs", type=int, nargs="+", default=[8192], metavar="N",
                   help="batch sizes to measure, one or more (default 8192)")
    p.add_argument("--steps", type=int, default=100, help="env steps per timed call (default 100)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available, else cpu)")
    p.add_argument("--mode", nargs="+", choices=["eager", "compile", "graph"],
                   help="how steps run: eager (plain PyTorch), compile (torch.compile), graph (compiled and "
                        "captured in a CUDA graph; CUDA only); several are measured in turn (default eager)")
    p.add_argument("--compile", action="store_true", help="shorthand for --mode compile")
    p.add_argument("--graph", action="store_true", help="shorthand for --mode graph (CUDA)")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per size and mode; the median counts "
                                                           "(default 5)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help=f"JSON file to write; it must not exist yet (default: a new "
                        f"{DEFAULT_DIR}/<env>_<device>_<time>.json)")
    p.add_argument("--no-save", action="store_true", help="print the table only, write no JSON")
    p.set_defaults(fn=_cmd_bench)

    from nitro.monitor import cli as monitor_cli
    from nitro.train import cli as train_cli

    train_cli.add_commands(sub)
    monitor_cli.add_commands(sub)
    return parser


def parse(argv: list[str] | None = None):
    """The command line as argparse reads it, with KEY=VALUE overrides also accepted after flags
    (``nitro train soccar --monitor env.num_envs=64``: argparse alone takes positionals only before)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and isinstance(getattr(args, "overrides", None), list) and all("=" in r and not r.startswith("-") for r in rest):
        args.overrides += rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input and failed runs print one line (``error: ...``) and return 2, an
    interrupted run returns 128 + the signal number, as a shell reports a process killed by it."""
    from nitro.train.stop import TrainingInterrupted

    args = parse(argv)
    try:
        return args.fn(args)
    except TrainingInterrupted as e:
        print(f"nitro: {e}", file=sys.stderr)
        return 128 + e.signum
    except (NitroError, KeyError, ValueError, TypeError, FileNotFoundError, ImportError) as e:
        # (a missing optional dependency raises ImportError naming what to install)
        if os.environ.get("NITRO_DEBUG"):
            raise
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {msg}", file=sys.stderr)
        return 2
    finally:
        if argv is None:  # the process's own command: it exits next, and its last garbage collections
            gc.freeze()   # need not walk PyTorch's objects (0.2-0.3 s of every command's exit on a CPU)


if __name__ == "__main__":
    sys.exit(main())
