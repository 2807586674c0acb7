"""Soccar games on one GPU: 1v1, 2v2 and 3v3 arenas with the game rules, the fused kernel and eager.

    python bench/soccar_game_gpu.py --out OUT [--meshes DIR] [--budget 230]

Sections, each in its own subprocess with its share of the time budget (the machinery of
bench/soccar_gpu.py: a slow compile, a hang or a crash costs only its section), most important first:

1. ``game_checks``: on the GPU, the fused K-tick kernel against its eager PyTorch twin
   (`tests/envs/soccar/kernels/stand_in_tick`: the reference's stages with the fused kernel's
   stand-in contacts and no body solve; the reference tick itself solves the bodies' contacts, which
   the fused kernel leaves out) on the same games (`game_arena`: cars over pads, at the ball and into
   each other, balls at the goal lines, a kickoff after each goal), 1v1, 2v2 and 3v3,
   ``--check-envs`` envs, ``--check-steps`` calls of K ticks with random controls: the share of envs
   whose events (goals, touches, bumps and demolitions with their attackers, pickups with their
   pads) agree on every call, and the ball's and cars' position errors. The cars start on their
   wheels or in the air and agreement is judged per env; rounding (fused multiply-adds) can move a
   decision at its margin, as in RocketSim against itself one ulp apart.
   Then the game twins' stage tests (tests/envs/soccar/kernels: test_boost_pads, test_ball_hit,
   test_car_bump, test_rules, test_game) on the GPU.
2. ``game_fused``: env-ticks/s of the fused kernel (K = ``--ticks``, controls held for the K ticks,
   32 envs per program) for each team size at every size (largest first), the kernels launched
   directly and, up to `GRAPH_UP_TO` envs, through `Arena.step` (which replays the step as a CUDA
   graph), each size's compile time (its first launch, empty Triton cache), device memory per env, and
   the time of one 8-tick step of 16,384 1v1 envs both ways.
3. ``game_eager``: env-ticks/s of the PyTorch tick (eager) at the smaller sizes, for the ratio.

Times are CUDA-event medians over repeats after ~60 ticks of warm-up; every result goes to
``OUT/soccar_<section>.json`` as soon as it is taken; a table is printed last. ``--device cpu``
dry-runs every code path on Triton's interpreter (it sets TRITON_INTERPRET=1) at 32 envs, 2 ticks
per call and 1 repeat.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import soccar_gpu as common  # the section machinery: Recorder, timing, workers, table

SECTIONS = ("game_checks", "game_fused", "game_eager")
SHARES = {"game_checks": 0.40, "game_fused": 0.45, "game_eager": 0.15}
DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 21, 1 << 22)
"""The curve over 1k-1M envs, and the larger batches where 1v1 and 2v2 run fastest (measured on an H200:
1v1 2.47e8 env-ticks/s at 1M, 2.83e8 at 2M, 3.01e8 at 4M). A size the fused kernels refuse (their
32-bit offsets: 3v3 above about 4.07M envs, `kernels/arena.check_offsets`) is recorded as an error with
its reason."""
CONTROL_POOL = 8  # random control sets the timed calls cycle through
BOUNDS = (3500.0, 4500.0)  # where the cars start, |x| and |y| (UU): clear of the walls


# --- games and controls ---------------------------------------------------------------------------


def game_arena(n: int, blue: int, orange: int, mode: str, meshes, seed: int = 0):
    """n envs of a blue-v-orange game: the kickoff, then every car on the floor (or, one in five, in
    the air) at a random spot near the ball or a pad, heading, speed and boost; a tenth of the balls
    rolling at a goal line; a kickoff after each goal."""
    import math

    import torch

    from nitro.envs.soccar import constants as C
    from nitro.envs.soccar.arena import Arena
    from nitro.envs.soccar.rigid_body import angle_to_rot_mat

    arena = Arena(n, blue=blue, orange=orange, device=common.DEVICE, mode=mode, meshes=meshes, seed=seed,
                  kickoff_after_goal=True)  # fmt: skip
    arena.reset_kickoff()
    g = torch.Generator().manual_seed(seed)
    pads = torch.tensor(C.BOOST_PADS)[:, :2]
    for c in range(blue + orange):
        anchor = torch.where((torch.rand(n, 1, generator=g) < 0.5), pads[torch.randint(len(pads), (n,), generator=g)], 0.0)
        xy = (anchor + (torch.rand(n, 2, generator=g) * 2 - 1) * 600).clamp(-torch.tensor(BOUNDS), torch.tensor(BOUNDS))
        air = torch.rand(n, generator=g) < 0.2
        z = torch.where(air, 150 + 600 * torch.rand(n, generator=g), torch.full((n,), C.CAR_SPAWN_REST_Z))
        yaw = (torch.rand(n, generator=g) * 2 - 1) * math.pi
        rot_mat = angle_to_rot_mat(yaw, torch.zeros(n), torch.zeros(n))
        vel = rot_mat[:, :, 0] * (torch.rand(n, 1, generator=g) * 1800)
        vel[:, 2] = torch.where(air, 300 * torch.randn(n, generator=g), 0.0)
        arena.set_car(
            c,
            pos=torch.cat((xy, z[:, None]), 1).to(arena.device),
            rot_mat=rot_mat.to(arena.device),
            vel=vel.to(arena.device),
            is_on_ground=(~air).to(arena.device),
            boost=(torch.rand(n, generator=g) * 100).to(arena.device),
        )
    at_goal = torch.rand(n, generator=g) < 0.1
    side = torch.where(torch.rand(n, generator=g) < 0.5, 1.0, -1.0)
    pos = torch.stack((torch.zeros(n), side * 4900, torch.full((n,), C.BALL_REST_Z)), 1)
    vel = torch.stack((torch.zeros(n), side * 2000, torch.zeros(n)), 1)
    rows = at_goal.nonzero().flatten().to(arena.device)
    arena.set_ball(pos=pos[at_goal].to(arena.device), vel=vel[at_goal].to(arena.device), env_ids=rows)
    return arena


def control_pool(n: int, cars: int, seed: int, device) -> list:
    """`CONTROL_POOL` random [n, cars, 8] control sets: throttle mostly forward, steer and sticks at
    random, jump in 10% of calls, boost in 30%, handbrake in 10%."""
    import torch

    g = torch.Generator().manual_seed(seed)
    pool = []
    for _ in range(CONTROL_POOL):
        analog = torch.rand(n, cars, 5, generator=g) * 2 - 1
        analog[..., 0] = analog[..., 0] * 0.6 + 0.4
        analog[..., 2:] = torch.where(torch.rand(n, cars, 3, generator=g) < 0.5, 0.0, analog[..., 2:])
        buttons = (torch.rand(n, cars, 3, generator=g) < torch.tensor([0.1, 0.3, 0.1])).float()
        pool.append(torch.cat((analog, buttons), -1).to(device))
    return pool


def cycling(step, pool):
    at = [0]

    def call():
        step(pool[at[0] % len(pool)])
        at[0] += 1

    return call


def tick_rate(rec, args, mode: str, n: int, blue: int, orange: int, call, repeats: int | None = None) -> None:
    warmup = max(2, 60 // args.ticks) if common.DEVICE == "cuda" else 1
    times = common._time_calls(call, repeats or args.repeats, warmup=warmup)
    row = {"mode": mode, "teams": f"{blue}v{orange}", "num_envs": n, "ticks_per_call": args.ticks, **common._timing_row(times)}
    row["env_ticks_per_s"] = n * args.ticks / row["median_s"]
    rec.add(**row)


# --- sections -------------------------------------------------------------------------------------


GRAPH_UP_TO = 262144
"""The game_fused section also times `Arena.step` (a CUDA graph per step) up to this many envs: where the
host's launches weigh."""
EVENT_FIELDS = ("goal_blue", "goal_orange", "goal_tick", "ball_touch", "demoed_by", "bumped_by", "boost_pickup_pad")


def section_game_checks(rec, args) -> None:
    import torch

    from nitro.core import tree
    from nitro.envs.soccar.kernels.arena import launch_step_ticks_
    from nitro.envs.soccar.state import ArenaEvents
    from tests.envs.soccar.kernels.stand_in_tick import stand_in_step_ticks

    n = args.check_envs
    for blue, orange in args.teams:

        def check(blue=blue, orange=orange):
            arena = game_arena(n, blue, orange, "eager", args.meshes, seed=3)
            cars = blue + orange
            fused, eager = tree.clone(arena.state), tree.clone(arena.state)
            pool = control_pool(n, cars, 5, arena.device)
            agree = torch.ones(n, dtype=torch.bool, device=arena.device)
            seen = {name: 0 for name in EVENT_FIELDS}
            for step in range(args.check_steps):
                controls = pool[step % len(pool)]
                events = ArenaEvents.none(n, cars, arena.device)
                launch_step_ticks_(fused, events, controls, arena.world, args.ticks)
                eager, want = stand_in_step_ticks(eager, ArenaEvents.none(n, cars, arena.device), controls, arena.world, args.ticks)
                for name in EVENT_FIELDS:
                    got, expected = getattr(events, name), getattr(want, name)
                    agree &= (got == expected).reshape(n, -1).all(1)
                    seen[name] += int((expected if expected.dtype == torch.bool else expected >= 0).sum())  # sync-ok
                for name in ("blue_score", "orange_score", "kickoff_count"):
                    agree &= getattr(fused, name) == getattr(eager, name)
            ball_err = (fused.ball.pos - eager.ball.pos).norm(dim=1)
            car_err = (fused.cars.pos - eager.cars.pos).norm(dim=-1).amax(1)
            share = float(agree.float().mean())
            rec.add(
                check=f"fused vs its eager twin, {blue}v{orange}",
                envs=n,
                ticks=args.check_steps * args.ticks,
                events_agree_share=share,
                events_seen=seen,
                median_ball_pos_error_uu=float(ball_err[agree].median()),
                median_car_pos_error_uu=float(car_err[agree].median()),
                passed=bool(share >= 0.99 and float(ball_err[agree].median()) <= 1e-2),
            )

        rec.measure(f"fused vs eager, {blue}v{orange}", check, needs_s=30)
        common._release()
    common.run_stage_tests(rec, args.meshes, common.GAME_STAGE_TESTS)


def section_game_fused(rec, args) -> None:
    from nitro.envs.soccar.kernels.arena import launch_step_ticks_
    from nitro.envs.soccar.state import ArenaEvents

    rec.data["compile_seconds"] = {}
    sizes = common._sizes_largest_first(args)
    for blue, orange in args.teams:
        name = f"fused {blue}v{orange}"

        def launcher(n, blue=blue, orange=orange, graph=False):
            """The kernels launched directly; with ``graph``, `Arena.step`, which replays the step as a CUDA
            graph from its second call."""
            arena = game_arena(n, blue, orange, "fused", args.meshes)
            events = ArenaEvents.none(n, blue + orange, arena.device)
            pool = control_pool(n, blue + orange, 1, arena.device)
            if graph:
                return arena, cycling(lambda c: arena.step(c, ticks=args.ticks), pool)
            return arena, cycling(lambda c: launch_step_ticks_(arena.state, events, c, arena.world, args.ticks), pool)

        def compile_once(name=name, launcher=launcher):
            _, step = launcher(min(1024, max(args.sizes)))
            t0 = time.perf_counter()
            step()
            common._sync()
            rec.data["compile_seconds"][name] = time.perf_counter() - t0
            rec.data["triton_cache"] = os.environ.get("NITRO_BENCH_CACHE", "cold")
            rec.say(f"  {name} compiled and ran in {time.perf_counter() - t0:.1f} s")

        if not rec.measure(f"compile {name}", compile_once, needs_s=60):
            continue
        for n in sizes:

            for graph in (False, True) if n <= GRAPH_UP_TO else (False,):

                def one(n=n, launcher=launcher, blue=blue, orange=orange, graph=graph):
                    _, step = launcher(n, graph=graph)
                    tick_rate(rec, args, "fused, CUDA graph" if graph else "fused", n, blue, orange, step)

                rec.measure(f"{name}{', CUDA graph' if graph else ''} at {n} envs", one, needs_s=10)
                common._release()
        if (blue, orange) == (1, 1):

            def memory(launcher=launcher):
                import torch

                if common.DEVICE != "cuda":
                    return
                common._release()
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                arena, step = launcher(sizes[0])
                step()
                torch.cuda.synchronize()
                state = sum(x.numel() * x.element_size() for x in _leaves(arena.state)) / sizes[0]
                peak = (torch.cuda.max_memory_allocated() - base) / sizes[0]
                rec.data["memory_bytes_per_env"] = {"1v1 state": state, f"1v1 peak at {sizes[0]} envs": peak}
                rec.say(f"  1v1: state {state:.0f} B per env, peak {peak:.0f} B per env")

            def step_16k(launcher=launcher, graph=False):
                _, step = launcher(16384, graph=graph)
                times = common._time_calls(step, args.repeats, warmup=max(2, 60 // args.ticks))
                rec.add(check="one step of 16,384 1v1 envs" + (", CUDA graph" if graph else ""), ticks=args.ticks,
                        **common._timing_row(times), passed=common.statistics.median(times) <= 1e-3)  # fmt: skip

            rec.measure("1v1 memory per env", memory, needs_s=8)
            rec.measure("one step of 16,384 1v1 envs", step_16k, needs_s=8)
            rec.measure("one step of 16,384 1v1 envs, CUDA graph", lambda: step_16k(graph=True), needs_s=8)


def section_game_eager(rec, args) -> None:
    sizes = [n for n in common._sizes_largest_first(args) if n <= (1 << 14) or common.DEVICE != "cuda"]
    for blue, orange in args.teams:
        for n in sizes:

            def one(n=n, blue=blue, orange=orange):
                arena = game_arena(n, blue, orange, "eager", args.meshes)
                pool = control_pool(n, blue + orange, 1, arena.device)
                step = cycling(lambda c: arena.step(c, ticks=args.ticks), pool)
                tick_rate(rec, args, "eager", n, blue, orange, step, repeats=max(1, args.repeats // 2))

            rec.measure(f"eager {blue}v{orange} at {n} envs", one, needs_s=20)
            common._release()


def _leaves(tree_):
    from nitro.core import tree

    return tree.leaves(tree_)


# --- orchestration --------------------------------------------------------------------------------


def _worker(section: str, args) -> None:
    faulthandler.enable()
    common._watchdog(max(5.0, args.limit - 4.0))
    deadline = time.monotonic() + args.limit - common.WRAP_UP_S
    import torch

    if common.DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark measures the GPU")
    extra = {"sizes": list(args.sizes), "ticks_per_call": args.ticks, "repeats": args.repeats, "limit_s": args.limit}
    rec = common.Recorder(Path(args.out) / f"soccar_{section}.json", section, extra, deadline)
    {"game_checks": section_game_checks, "game_fused": section_game_fused, "game_eager": section_game_eager}[section](
        rec, args
    )
    rec.finish()
    rec.say(f"done, {len(rec.data['results'])} results, {len(rec.data['errors'])} errors")


def _summary(out: Path) -> str:
    """The best rate per team size against the issue's goals, memory and the 16k-env step."""
    import json

    goals = {"1v1": 3e8, "2v2": 1.5e8, "3v3": 1e8}
    lines = ["", "summary"]
    for section in ("game_fused", "game_eager"):
        path = out / f"soccar_{section}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        for teams, goal in goals.items():
            rows = [r for r in data["results"] if r.get("teams") == teams and "env_ticks_per_s" in r]
            if rows:
                top = max(rows, key=lambda r: r["env_ticks_per_s"])
                met = "met" if top["env_ticks_per_s"] >= goal else "not met"
                lines.append(f"  best {section} {teams}: {top['env_ticks_per_s']:.3e} env-ticks/s at {top['num_envs']} envs"
                             + (f" (goal {goal:.1e}: {met})" if section == "game_fused" else ""))  # fmt: skip
        for what, per_env in data.get("memory_bytes_per_env", {}).items():
            lines.append(f"  memory {what}: {per_env:.0f} B per env")
        for what, seconds in data.get("compile_seconds", {}).items():
            lines.append(f"  compile {what}: {seconds:.1f} s")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for soccar_game_*.json")
    parser.add_argument("--meshes", default=None, help="folder of soccar/mesh_*.cmf (else $NITRO_MESHES / package)")
    parser.add_argument("--sizes", default=None, help="comma-separated env counts (default 1k,16k,262k,1M,2M,4M)")
    parser.add_argument("--ticks", type=int, default=None, help="ticks per timed call (8; 2 dry)")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement (10; 1 dry)")
    parser.add_argument("--check-envs", type=int, default=None, help="envs of each fused-vs-eager check (4096; 32 dry)")
    parser.add_argument("--check-steps", type=int, default=None, help="calls of K ticks per check (6; 2 dry)")
    parser.add_argument("--budget", type=float, default=230.0, help="seconds for all sections together")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections to run, comma-separated")
    parser.add_argument("--teams", default="1v1,2v2,3v3", help="team sizes, BLUEvORANGE, comma-separated")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dry = args.device == "cpu"
    if dry:
        os.environ["TRITON_INTERPRET"] = "1"
    args.sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else ((32,) if dry else DEFAULT_SIZES)
    args.teams = tuple(tuple(int(x) for x in team.split("v")) for team in args.teams.split(","))
    args.ticks = args.ticks or (2 if dry else 8)
    args.repeats = args.repeats or (1 if dry else 10)
    args.check_envs = args.check_envs or (32 if dry else 4096)
    args.check_steps = args.check_steps or (2 if dry else 6)
    if args.meshes:
        os.environ["NITRO_MESHES"] = str(Path(args.meshes).resolve())
    common.DEVICE = args.device
    if args.worker:
        _worker(args.worker, args)
        return
    # a Triton cache warmed by bench/soccar_warm.py is reused (its compile times are that script's)
    os.environ["NITRO_BENCH_CACHE"] = "warm" if "TRITON_CACHE_DIR" in os.environ else "cold"
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="nitro_game_triton_"))
    wanted = common.run_sections(__file__, args, SECTIONS, SHARES, [
        "--sizes", ",".join(map(str, args.sizes)), "--ticks", str(args.ticks), "--repeats", str(args.repeats),
        "--check-envs", str(args.check_envs), "--check-steps", str(args.check_steps),
        "--teams", ",".join(f"{b}v{o}" for b, o in args.teams),
    ])
    print(common._table(Path(args.out), wanted) + _summary(Path(args.out)), flush=True)


if __name__ == "__main__":
    main()
