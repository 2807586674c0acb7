"""Exported bots playing nitro's simulation through RLBot v5 GamePackets, every decision checked
against the training env (helpers of the deploy tests).

`play` steps N one-env matches tick by tick. Each tick, every env's state becomes the GamePacket the
game would send (`nitro.deploy.game_packet`, packed and read back with `rlbot`'s own flatbuffer
types), every car's bot (the exported folder's ``nitro_runtime.Agent``) answers it, and the arena
steps one tick with the controls the bots returned on the tick before (RLBot applies a bot's output
one tick late). On each of a bot's decision ticks the training env observes the same state
(`Soccar.observe`, with the previous step's controls and the policy's recurrent state as training
keeps them) and the trained policy acts on that observation: the bot's observation must equal it
and its action and controls must be the policy's. On every tick the controls the arena applies must
be what `Soccar.step` applies on that tick of the step: the previous step's controls for
``action_delay`` ticks (at least one: RLBot's lag), then the new ones.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import itertools
from pathlib import Path

import torch

from nitro.core import tree
from nitro.deploy import game_packet as packets
from nitro.envs.soccar import ArenaEvents, fold_tick
from nitro.envs.soccar.rl import Soccar, SoccarState

OBS_ATOL = 2e-6
"""Largest difference allowed between the bot's and the env's observation entries. The packet
carries rotations as Euler angles in float32: the bot's rotation matrix (RocketSim's
Angle::ToRotMat in float64, rounded to float32) differs from the simulator's by a few float32 ulps
of 1 (2^-24 = 6e-8 each; measured at most 2.4e-7 against RocketSim's own conversion), and the
builders multiply axes by vectors of at most a few units (GigaLearn's AdvancedObs: angular
velocity / 3, positions / 5000); everything else travels as float32 unchanged and is equal."""
CONTROL_ATOL = 1e-5
"""Continuous actions: the policy's output on the bot's observation vs on the env's differs by the
observation's difference times the network's gain (orthogonal layers, gain sqrt(2) each: a few
units), i.e. by at most ~1e-5; discrete actions must be the same entry of the table (exact)."""


@dataclasses.dataclass
class Trained:
    """A policy, the env it was trained on, and its exported bot folder."""

    env: Soccar
    policy: torch.nn.Module
    obs_rms: object | None
    folder: Path


def load_runtime(folder: Path):
    """The bot folder's ``nitro_runtime.py`` as a module (what ``bot.py`` imports)."""
    name = f"nitro_runtime_{abs(hash(str(folder)))}"
    spec = importlib.util.spec_from_file_location(name, folder / "nitro_runtime.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def field_pads() -> list[tuple[float, float]]:
    """The boost pads' x, y as the bot reads them from RLBot's FieldInfo."""
    return [(p.location.x, p.location.y) for p in packets.field_info().boost_pads]


@dataclasses.dataclass
class Reference:
    """What the training env keeps for one env between steps: the controls of the last two steps and
    the policy's recurrent state."""

    previous: torch.Tensor
    current: torch.Tensor
    hidden: tuple


@torch.no_grad()
def decide(t: Trained, state: SoccarState, hidden: tuple):
    """The training env's observation [C, D] and the policy's deterministic action and controls
    [C, 8] on ``state`` (one env), as the trainer computes them; the next recurrent state."""
    obs = t.env.observe(state)
    out, _, hidden = t.policy(t.obs_rms.normalize(obs) if t.obs_rms else obs, hidden)
    mask = t.env.action_mask(state)
    if mask is not None:
        out = t.policy.dist.mask_logits(out, mask)
    action = t.policy.dist.to_env(t.policy.dist.mode(out))
    controls = t.env.params.action(action, state) * state.active.unsqueeze(-1)
    return obs, action, controls[0], hidden


def coverage(state: SoccarState) -> collections.Counter:
    """How many cars of ``state`` are in each of the situations the adapter must get right."""
    cars, pads = state.game.cars, state.game.pads
    airborne = ~cars.is_on_ground & ~cars.is_demoed
    counts = {
        "on ground": cars.is_on_ground & ~cars.is_demoed, "airborne": airborne,
        "jumping": cars.is_jumping & ~cars.is_demoed, "jumping on the ground": cars.is_jumping & cars.is_on_ground,
        "flip window open": airborne & cars.has_jumped & (cars.air_time_since_jump < 1.25) & ~cars.is_jumping,
        "flip window closed": airborne & cars.has_jumped & (cars.air_time_since_jump >= 1.25),
        "flipping": cars.is_flipping, "double jumped": cars.has_double_jumped, "demolished": cars.is_demoed,
        "supersonic": cars.is_supersonic, "boosting": cars.boosting_time > 0, "powersliding": cars.handbrake_val > 0,
        "pads taken": ~pads.is_active,
    }  # fmt: skip
    return collections.Counter({k: int(v.sum()) for k, v in counts.items()})  # sync-ok: a test's bookkeeping


def play(trained: list[Trained], start: SoccarState, world, ticks: int) -> collections.Counter:
    """Env ``e`` of ``start`` played by ``trained[e]``'s bot on every car for ``ticks`` ticks (all
    envs in one batch, one tick at a time); asserts the parity described in the module docstring.
    Returns the coverage summed over the decision ticks and the number of decisions checked."""
    n, c = start.num_envs, start.num_cars
    runtime = load_runtime(trained[0].folder)
    pads = field_pads()
    agents = [[runtime.Agent(t.folder, pads, i) for i in range(c)] for t in trained]
    refs = [Reference(torch.zeros(c, 8), torch.zeros(c, 8), t.policy.initial_hidden(c, "cpu")) for t in trained]
    game, applied = start.game, torch.zeros(n, c, 8)
    seen = collections.Counter()
    for tick in range(ticks):
        state = dataclasses.replace(start, game=game)
        returned = torch.zeros(n, c, 8)
        for e, (t, ref) in enumerate(zip(trained, refs)):
            packet = packets.on_the_wire(packets.game_packet(state, env=e, frame=tick))
            for i, agent in enumerate(agents[e]):
                returned[e, i] = torch.from_numpy(agent.step(packet))
            p = t.env.params
            step_tick = tick % p.tick_skip
            if step_tick == 0:
                one = dataclasses.replace(
                    start, game=tree.index(game, torch.tensor([e])), events=ArenaEvents.none(1, c, "cpu"),
                    prev_action=ref.current[None], ticks_since_touch=torch.zeros(1, dtype=torch.int64),
                    active=start.active[e : e + 1],
                )  # fmt: skip
                obs, action, controls, ref.hidden = decide(t, one, ref.hidden)
                ref.previous, ref.current = ref.current, controls
                for i, agent in enumerate(agents[e]):
                    where = f"tick {tick}, env {e}, car {i}"
                    torch.testing.assert_close(torch.from_numpy(agent.obs), obs[i], atol=OBS_ATOL, rtol=0,
                                               msg=lambda m, where=where: f"observation at {where}: {m}")
                    if t.env.action_space.__class__.__name__ == "Discrete":
                        assert int(agent.action) == int(action[i]), f"action at {where}"
                seen += coverage(one)
                seen["decisions"] += c
            held = ref.current if step_tick >= max(p.action_delay, 1) else ref.previous
            torch.testing.assert_close(applied[e], held, atol=CONTROL_ATOL, rtol=0,
                                       msg=lambda m, tick=tick, e=e: f"controls on tick {tick} of env {e}: {m}")
        game, _ = fold_tick(game, ArenaEvents.none(n, c, "cpu"), applied, world)
        applied = returned
    return seen


def mixed(*states: SoccarState) -> SoccarState:
    """Env ``e`` of the result is env ``e`` of ``states[e % len(states)]`` (same shapes)."""
    n = states[0].num_envs
    out = states[0]
    for k, s in itertools.islice(enumerate(states), 1, None):
        pick = torch.arange(n) % len(states) == k
        out = dataclasses.replace(out, game=tree.where(pick, s.game, out.game), active=torch.where(
            pick[:, None], s.active, out.active))
    return out
