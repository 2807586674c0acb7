"""Which fields of the soccar state the next ticks need, and how few bytes a faithful state can take.

    python bench/soccar_state_read_set.py --out OUT [--envs 64] [--ticks 90] [--meshes DIR]

The reference tick (`arena.tick`, PyTorch, CPU) steps the speed benchmark's 1v1 games
(`soccar_game_gpu.game_arena`: cars on the floor or in the air near the ball or a pad, a tenth of
the balls rolling at a goal) for ``--warmup`` ticks of random controls (drawn afresh every tick, the
benchmark's mix), a tenth of the envs' blue car then demolished with half a second to its respawn.
From that state, the run is repeated once per field with the field changed in every env
(`perturbed`: a float moved by about 1%, a flag flipped, a rotation turned 0.01 rad, a count moved;
the last controls one control at a time) and the same controls, and every field and event that then
differs, bit for bit, at any of the ``--ticks`` ticks is noted. A field is *needed* when its change
reaches the events or another needed field (`needed`): a counter that changes only itself, a field
overwritten before the tick reads it, or one only the tick's reports read (the hit info) is not, nor
is one holding a single value at every tick boundary of the run, in every env (the velocity caches
the tick empties). Situations the games do not meet (an auto-flip, say) leave the fields needed only
there unseen, so the needed set is a lower bound.

The bytes a 1v1 env's state takes: as stored now; the needed fields as stored; and a lower bound for
any state that keeps the trajectories and events bit for bit: the needed fields' float32 values at 4
bytes each, every flag, count and index at none. Writes OUT/soccar_state_read_set.json and prints a
table."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import soccar_game_gpu as game_bench
import soccar_gpu as common

CONTROLS = ("throttle", "steer", "pitch", "yaw", "roll", "jump", "boost", "handbrake")


def fields_of(state) -> list[tuple[str, str]]:
    """(group, field) for every tensor of a `GameState`: the ball's, the cars', the pads', then the
    game's own."""
    out = [(g, f.name) for g in ("ball", "cars", "pads") for f in dataclasses.fields(getattr(state, g))]
    return out + [
        ("game", f.name) for f in dataclasses.fields(state) if f.name not in ("ball", "cars", "pads")
    ]


def get(state, group: str, name: str):
    return getattr(state, name) if group == "game" else getattr(getattr(state, group), name)


def replaced(state, group: str, name: str, value):
    if group == "game":
        return dataclasses.replace(state, **{name: value})
    return dataclasses.replace(state, **{group: dataclasses.replace(getattr(state, group), **{name: value})})


def perturbed(x, name: str, tick_count, num_cars: int, control: str | None = None):
    """``x`` changed a little in every element (of ``control`` alone in ``last_controls``), staying a
    state the tick can meet."""
    import torch

    if x.dtype == torch.bool:
        return ~x
    if name == "car_contact_id" or name == "prev_locked_car_id":
        return (x + 1) % (num_cars + 1)
    if name.startswith("ball_hit_info_tick_count"):  # never <-> the tick before this one
        recent = (tick_count - 1).view(-1, *([1] * (x.dim() - 1))).expand_as(x)
        return torch.where(x == -1, recent, torch.full_like(x, -1))
    if not x.dtype.is_floating_point:
        return x + 7
    if name == "rot_mat":
        c, s = math.cos(0.01), math.sin(0.01)
        turn = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=x.dtype)
        return turn @ x
    if name == "last_controls":  # one control at a time (`CONTROLS`): an axis moved, a button flipped
        column = x[..., CONTROLS.index(control)]
        changed = 1 - column if CONTROLS.index(control) >= 5 else column * 0.9 + 0.05
        return x.index_copy(-1, torch.tensor([CONTROLS.index(control)]), changed[..., None])
    if name == "auto_flip_torque_scale":
        return torch.where(x == 0, torch.ones_like(x), -x)
    if name == "cooldown":
        return x + 0.5
    if name == "boost":
        return (x * 0.99 + 0.5).clamp(0, 100)
    if name == "handbrake_val":
        return (x * 0.99 + 0.005).clamp(0, 1)
    return x * 1.01 + 0.013


def run(state, pool, world, ticks: int):
    """Every tick's state and events from ``state``, with ``pool``'s controls tick by tick."""
    from nitro.core.tree import leaves
    from nitro.envs.soccar.arena import tick

    seen = []
    for t in range(ticks):
        state, events = tick(state, pool[t], world)
        seen.append((state, leaves(events)))
    return seen


def differences(base, other, skip: tuple[str, str]) -> set[str]:
    """Every field (and "events") where ``other`` differs from ``base`` at some tick, ``skip`` aside."""
    import torch

    found = set()
    for (sa, ea), (sb, eb) in zip(base, other):
        found |= {
            ".".join(key)
            for key in fields_of(sa)
            if key != skip and not torch.equal(get(sa, *key), get(sb, *key))
        }
        if any(not torch.equal(a, b) for a, b in zip(ea, eb)):
            found.add("events")
    return found


def needed(changes: dict[str, set[str]], field_of: dict[str, str]) -> set[str]:
    """The probes whose change reaches the events or a needed field other than their own: the
    largest such set (from every probe, dropping those that reach neither until none drops), so a
    field read only by fields nothing else reads (the ball's rotation, read only for the hit info the
    tick reports) is not needed."""
    keep = set(changes)
    while True:
        fields = {field_of[p] for p in keep}
        kept = {p for p in keep if "events" in changes[p] or (changes[p] & fields) - {field_of[p]}}
        if kept == keep:
            return keep
        keep = kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for soccar_state_read_set.json")
    parser.add_argument("--envs", type=int, default=64, help="1v1 envs")
    parser.add_argument("--warmup", type=int, default=40, help="ticks before the state is taken")
    parser.add_argument("--ticks", type=int, default=90, help="ticks compared after each change")
    parser.add_argument(
        "--meshes", default=None, help="folder of soccar/mesh_*.cmf (else $NITRO_MESHES / package)"
    )
    args = parser.parse_args()
    import torch

    from nitro.envs.soccar.arena import tick

    common.DEVICE = "cpu"
    torch.set_num_threads(max(1, torch.get_num_threads()))
    arena = game_bench.game_arena(args.envs, 1, 1, "eager", args.meshes)
    sets = args.warmup + args.ticks  # a fresh set of controls every tick (the pool's mix, none repeated)
    draws = range(-(-sets // game_bench.CONTROL_POOL))
    controls = [
        c.cpu() for seed in draws for c in game_bench.control_pool(args.envs, 2, seed=seed, device="cpu")
    ]
    state, world = arena.state, arena.world
    for t in range(args.warmup):
        state, _ = tick(state, controls[t], world)
    pool = controls[args.warmup :]
    demoed = torch.arange(args.envs) % 10 == 0
    cars = state.cars
    is_demoed, timer = cars.is_demoed.clone(), cars.demo_respawn_timer.clone()
    is_demoed[demoed, 0], timer[demoed, 0] = True, 0.5
    state = dataclasses.replace(
        state, cars=dataclasses.replace(cars, is_demoed=is_demoed, demo_respawn_timer=timer)
    )

    started = time.perf_counter()
    base = run(state, pool, world, args.ticks)
    rows, changes, field_of = [], {}, {}
    for group, name in fields_of(state):
        x = get(state, group, name)
        boundaries = [x] + [get(s, group, name) for s, _ in base]
        # one value in every env at every tick boundary
        constant = all(torch.equal(b, x[:1].expand_as(b)) for b in boundaries)
        for control in CONTROLS if name == "last_controls" else (None,):
            changed = perturbed(x, name, state.tick_count, 2, control)
            assert not torch.equal(changed, x), f"{group}.{name}: the change left it as it was"
            label = f"{group}.{name}" + (f".{control}" if control else "")
            changes[label] = differences(
                base, run(replaced(state, group, name, changed), pool, world, args.ticks), (group, name)
            )
            field_of[label] = f"{group}.{name}"
            width = (x[0].numel() // len(CONTROLS) if control else x[0].numel()) * x.element_size()
            rows.append({"field": label, "dtype": str(x.dtype).removeprefix("torch."), "bytes": width,
                         "float": x.dtype.is_floating_point, "constant_between_ticks": constant,
                         "changes": sorted(changes[label])})  # fmt: skip
            print(f"{label:<60} {width:4d} B {'constant' if constant else '':<9} reaches {len(changes[label])}: "
                  f"{', '.join(sorted(changes[label])[:6])}", flush=True)  # fmt: skip
    kept = needed(changes, field_of)
    for r in rows:
        r["needed"] = r["field"] in kept and not r["constant_between_ticks"]
        r["float32_bytes"] = r["bytes"] if r["needed"] and r["float"] else 0  # (the floats are float32)
        print(f"{r['field']:<60} {r['bytes']:4d} B  {'needed' if r['needed'] else '-'}")
    stored = sum(r["bytes"] for r in rows)
    kept_bytes = sum(r["bytes"] for r in rows if r["needed"])
    floor = sum(r["float32_bytes"] for r in rows)
    result = {
        "device": "cpu",
        "torch": torch.__version__,
        "envs": args.envs,
        "warmup_ticks": args.warmup,
        "ticks": args.ticks,
        "seconds": round(time.perf_counter() - started, 1),
        "bytes_per_env": {"stored": stored, "needed_as_stored": kept_bytes, "needed_float32_only": floor},
        "fields": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soccar_state_read_set.json").write_text(json.dumps(result, indent=1))
    print(f"bytes per 1v1 env: stored {stored}, the needed fields as stored {kept_bytes}, "
          f"their float32 values alone {floor} (goal 512)")  # fmt: skip


if __name__ == "__main__":
    main()
