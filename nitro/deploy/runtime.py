"""The exported bot's runtime: an RLBot v5 `GamePacket` -> nitro's soccar state -> the policy graph ->
the car's controls, every tick, with the tick skip and action delay the policy was trained with.

numpy and onnxruntime only (no torch, no nitro): ``nitro export RUN --rlbot DIR`` copies this file
into the bot folder as ``nitro_runtime.py``, beside ``bot.py`` (the `rlbot` Bot), ``policy.onnx`` (the
run's observation builder, action mask, policy and action parser as one graph) and ``nitro.json`` (the
team slots, timing and RocketSim constants the graph and this file read).

The packet adapter, field by field
----------------------------------
`PacketAdapter.update` reads each packet and `PacketAdapter.state` turns the last one into one env of
nitro's batched state (`SoccarState`: the names below, a leading batch axis of 1). Car ``i`` is slot
``i`` of the run's arena: the packet's blue players in packet order fill the blue slots, its orange
players the orange ones; unfilled slots are inactive (``active`` false), which the observation
builders read as absent cars, as the env does for benched cars.

============================  ==================================================================
ball.pos / vel / ang_vel      ``balls[0].physics`` location, velocity, angular_velocity (float32 on
                              the wire, used as they are)
pads.is_active                ``boost_pads[j].is_active``, moved to RocketSim's pad order: packet pad
                              ``j`` is the arena pad at the position of FieldInfo pad ``j`` (matched
                              by x, y at start-up: RLBot v5's order is neither RocketSim's, 6 big
                              pads first, nor RLGym's)
pads.cooldown                 0 when active, else the pad's respawn time (RocketSim's COOLDOWN_BIG 10 s,
                              COOLDOWN_SMALL 4 s) minus ``timer`` (RLBot counts seconds since pickup,
                              RocketSim seconds until active), floored at 0
cars.pos / vel / ang_vel      ``physics`` location, velocity, angular_velocity
cars.rot_mat                  ``physics.rotation`` (pitch, yaw, roll in radians) through RocketSim's
                              ``Angle::ToRotMat`` (btMatrix3x3::setEulerYPR(yaw, -pitch, -roll)),
                              columns forward, right, up, computed in float64 and rounded to float32
cars.boost                    ``boost`` (0-100)
cars.is_supersonic            ``is_supersonic``
cars.has_jumped               ``has_jumped``
cars.has_double_jumped        ``has_double_jumped``
cars.has_flipped              ``has_dodged``
cars.flip_time                ``dodge_elapsed`` (seconds since the flip started; 0 after landing)
cars.is_flipping              ``air_state == Dodging``
cars.is_demoed                ``demolished_timeout >= 0`` (RLBot sends -1 for cars in play)
cars.demo_respawn_timer       ``demolished_timeout`` while demolished, else 0
cars.last_controls            ``last_input``: the 8 controls of the last tick, buttons as 0 / 1
cars.is_on_ground             ``air_state == OnGround``. The packet has one air state per car, while
                              RocketSim's car can be on its wheels and jumping at once (the first ~5
                              ticks of a jump off the floor): OnGround is read as wheel contact, and
                              ``is_jumping`` is recovered from the jump rule below. A demolished car's
                              air state is not its own (RLBot reports OnGround): it keeps the value it
                              had when it was demolished, as RocketSim freezes a demolished car
cars.wheels_with_contact      all four wheels when on the ground, none otherwise (the builders read
                              only whether 3 or more touch, which is ``is_on_ground``)
cars.is_jumping               in the air: ``air_state == Jumping``; on the ground: RocketSim's
                              Car::_UpdateJump replayed tick by tick from the car's jump input,
                              ``has_jumped`` and ``jump_time`` (below)
cars.jump_time                seconds since the jump began, counted by that replay
cars.air_time_since_jump      0 on the ground or without a jump; 1.25 - ``dodge_timeout`` while the
                              flip window is open (RLBot counts 1.25 s down from the jump's end, as
                              RocketSim counts this up); after it closes (``dodge_timeout`` -1) it
                              keeps counting up by a tick per tick, as RocketSim's does
cars.handbrake_val            RocketSim's powerslide value, replayed: +5/s while ``last_input.handbrake``
                              is held, -2/s otherwise, within [0, 1]
cars.is_boosting /            RocketSim's Car::_UpdateBoost replayed: boosting while boost is held and
cars.boosting_time            the car had boost, and for at least BOOST_MIN_TIME (0.1 s) once begun;
                              the time counts up while boosting, else 0
cars.supersonic_time          counts up by a tick while ``is_supersonic``, else 0
============================  ==================================================================

Fields not listed are left at a fresh RocketSim car's values (zeros): flip_rel_torque, air_time, the
auto-flip state, body-world contact (``has_world_contact``: nitro's soccar does not simulate body
contacts yet, so policies have never seen it set), bump state, and RocketSim's hidden wheel state;
so are the step's events and the ticks since the last touch, which no observation builder or
action mask reads (rewards and done conditions do, and the bot computes neither).
The replays (``is_jumping`` on the ground, ``jump_time``, ``air_time_since_jump`` after the flip
window, ``handbrake_val``, ``boosting_time``, ``supersonic_time``) start with each episode from what
its first packet says (a kickoff's fresh cars exactly; a jump that ended before it is taken to be old
enough to reset on landing) and are exact when the bot sees every tick; when packets are skipped
each missed tick is replayed with the inputs of the packet that follows.

Timing
------
The policy acts every ``tick_skip`` ticks. RLBot applies the controls a bot returns one tick late,
which is the 1-tick ``action_delay`` of RLGym v2's RocketSimEngine (nitro's default): with that delay
the bot returns a new action on the tick it decides it. A longer delay ``d`` (GigaLearn's
``tick_skip - 1``) holds the previous action for ``d - 1`` more ticks. A run trained without a delay
(``action_delay=0``) acts one tick later here than in training, as on any RLBot setup.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort

# RLBot v5's enums (rlbot_flatbuffers: `int(AirState.OnGround) == 0`, ...), read as ints.
ON_GROUND, JUMPING, DOUBLE_JUMPING, DODGING, IN_AIR = range(5)
INACTIVE, COUNTDOWN, KICKOFF, ACTIVE, GOAL_SCORED, REPLAY, PAUSED, ENDED = range(8)
PLAYING = (KICKOFF, ACTIVE)
"""Match phases in which cars move: an episode runs through them; any other phase but PAUSED ends it."""

CAR_FIELDS = {
    "pos": ((3,), np.float32), "rot_mat": ((3, 3), np.float32), "vel": ((3,), np.float32),
    "ang_vel": ((3,), np.float32), "is_on_ground": ((), np.bool_), "wheels_with_contact": ((4,), np.bool_),
    "has_jumped": ((), np.bool_), "has_double_jumped": ((), np.bool_), "has_flipped": ((), np.bool_),
    "jump_time": ((), np.float32), "flip_time": ((), np.float32), "is_flipping": ((), np.bool_),
    "is_jumping": ((), np.bool_), "air_time_since_jump": ((), np.float32), "boost": ((), np.float32),
    "boosting_time": ((), np.float32), "is_boosting": ((), np.bool_), "is_supersonic": ((), np.bool_),
    "supersonic_time": ((), np.float32), "handbrake_val": ((), np.float32), "is_demoed": ((), np.bool_),
    "demo_respawn_timer": ((), np.float32), "last_controls": ((8,), np.float32),
}  # fmt: skip
"""The CarState fields the adapter fills ([1, C, ...] as ``cars.<name>``): trailing shape and dtype."""
STATE_FIELDS = {
    "ball.pos": ((3,), np.float32), "ball.vel": ((3,), np.float32), "ball.ang_vel": ((3,), np.float32),
    "pads.is_active": ((34,), np.bool_), "pads.cooldown": ((34,), np.float32),
    **{f"cars.{name}": ((-1, *shape), dtype) for name, (shape, dtype) in CAR_FIELDS.items()},
    "active": ((-1,), np.bool_),
}  # fmt: skip
"""Everything `PacketAdapter.state` returns, after the batch axis (-1: the car slots)."""
AGENT_INPUTS = ("prev_action", "hidden.h", "hidden.c")
"""Graph inputs the agent supplies: the controls of each car's last step [1, C, 8] (GigaLearn's
previous action; only the bot's own row is known and read), and the LSTM state [C, H] if any."""


def euler_to_rot_mat(pitch: np.ndarray, yaw: np.ndarray, roll: np.ndarray) -> np.ndarray:
    """RocketSim's ``Angle(yaw, pitch, roll).ToRotMat()`` (btMatrix3x3::setEulerYPR(yaw, -pitch, -roll)):
    [..., 3, 3] float32 with columns forward, right, up, computed in float64."""
    pitch, yaw, roll = (np.asarray(a, np.float64) for a in (pitch, yaw, roll))
    ci, cj, ch = np.cos(-roll), np.cos(-pitch), np.cos(yaw)
    si, sj, sh = np.sin(-roll), np.sin(-pitch), np.sin(yaw)
    cc, cs, sc, ss = ci * ch, ci * sh, si * ch, si * sh
    rows = (
        (cj * ch, sj * sc - cs, sj * cc + ss),
        (cj * sh, sj * ss + cc, sj * cs - sc),
        (-sj, cj * si, cj * ci),
    )
    return np.stack([np.stack(r, -1) for r in rows], -2).astype(np.float32)


def pad_order(field_pads: list[tuple[float, float]], arena_pads: list[tuple[float, float]], tolerance: float = 1.0):
    """[34] int: the arena (RocketSim) index of each of the packet's pads, matched by x, y position."""
    if len(field_pads) != len(arena_pads):
        raise ValueError(f"the match has {len(field_pads)} boost pads, the bot was trained on a soccar field "
                         f"with {len(arena_pads)}: play it on a standard soccar map")
    arena = np.asarray(arena_pads, np.float64)
    dist = np.linalg.norm(np.asarray(field_pads, np.float64)[:, None, :] - arena[None], axis=-1)
    order = dist.argmin(1)
    if dist.min(1).max() > tolerance or len(set(order.tolist())) != len(arena_pads):
        worst = int(dist.min(1).argmax())
        raise ValueError(f"boost pad {worst} of the match at {tuple(field_pads[worst])} is not a soccar pad "
                         f"(nearest {dist[worst].min():.1f} UU away): play the bot on a standard soccar map")
    return order


# --- what RocketSim keeps that the packet does not: replayed tick by tick -----------------------------


@dataclasses.dataclass
class Replay:
    """Per car slot [C]: RocketSim state the packet lacks, advanced by RocketSim's per-tick rules."""

    on_ground: np.ndarray
    is_jumping: np.ndarray
    jump_time: np.ndarray
    has_jumped: np.ndarray
    air_time_since_jump: np.ndarray
    handbrake_val: np.ndarray
    is_boosting: np.ndarray
    boosting_time: np.ndarray
    supersonic_time: np.ndarray
    jump_held: np.ndarray
    """The jump input of the last tick (the jump starts on a press)."""
    boost: np.ndarray
    """The boost amount after the last tick (boosting needs some left)."""
    is_demoed: np.ndarray


@dataclasses.dataclass(frozen=True)
class CarFacts:
    """The packet's per-car facts the replay reads, per slot [C]."""

    on_ground: np.ndarray
    air_state: np.ndarray
    has_jumped: np.ndarray
    dodge_timeout: np.ndarray
    is_demoed: np.ndarray
    is_supersonic: np.ndarray
    boost: np.ndarray
    controls: np.ndarray
    """last_input [C, 8]."""


class Rules:
    """RocketSim's constants the replay needs, as float32 (read from nitro.json: the same values nitro's
    car simulation uses)."""

    def __init__(self, constants: dict):
        f = {k: np.float32(v) for k, v in constants.items()}
        self.dt = f["tick_time"]
        self.handbrake_rise, self.handbrake_fall = np.float32(f["powerslide_rise_rate"] * self.dt), np.float32(
            f["powerslide_fall_rate"] * self.dt)
        self.jump_min_time, self.jump_max_time = f["jump_min_time"], f["jump_max_time"]
        self.jump_reset_time = f["jump_reset_time"]
        self.flip_window = f["doublejump_max_delay"]
        self.boost_min_time = f["boost_min_time"]


def start(p: CarFacts, rules: Rules) -> Replay:
    """The replay at an episode's first packet: what the packet tells (a kickoff's fresh cars exactly);
    a car already boosting or supersonic is taken to have been so for one tick, and one whose jump
    has ended to have jumped at least ``jump_reset_time`` ago (the only use of the time: it lands
    and gets its jump back as RocketSim's car would)."""
    zero = np.zeros(p.on_ground.shape, np.float32)
    boosting = (p.controls[:, 6] > 0.5) & (p.boost > 0)
    jump_ended = p.has_jumped & (p.air_state != JUMPING)
    replay = Replay(
        on_ground=p.on_ground.copy(), is_jumping=p.air_state == JUMPING,
        jump_time=np.where(jump_ended, rules.jump_reset_time, zero),
        has_jumped=p.has_jumped.copy(), air_time_since_jump=zero.copy(), handbrake_val=zero.copy(),
        is_boosting=boosting, boosting_time=np.where(boosting, rules.dt, zero),
        supersonic_time=np.where(p.is_supersonic, rules.dt, zero), jump_held=p.controls[:, 5] > 0.5,
        boost=p.boost.copy(), is_demoed=p.is_demoed.copy(),
    )  # fmt: skip
    return reconcile(replay, p, rules)


def tick(r: Replay, p: CarFacts, on_ground: np.ndarray, rules: Rules) -> Replay:
    """One RocketSim tick of the replayed state with the packet's inputs (the controls of that tick), in
    Car::_PreTickUpdate's order: _UpdateWheels (powerslide), _UpdateJump, _UpdateDoubleJumpOrFlip
    (air time since the jump), _UpdateBoost; then _PostTickUpdate (supersonic time)."""
    dt, jump, handbrake, boost_held = rules.dt, p.controls[:, 5] > 0.5, p.controls[:, 7] > 0.5, p.controls[:, 6] > 0.5
    handbrake_val = np.clip(r.handbrake_val + np.where(handbrake, rules.handbrake_rise, -rules.handbrake_fall), 0, 1)

    reset = on_ground & ~r.is_jumping & ~(r.has_jumped & (r.jump_time < rules.jump_reset_time))
    has_jumped = r.has_jumped & ~reset
    jump_time = np.where(reset, np.float32(0), r.jump_time)
    continuing = (jump_time < rules.jump_min_time) | (jump & (jump_time < rules.jump_max_time))
    starting = ~r.is_jumping & on_ground & jump & ~r.jump_held
    is_jumping = np.where(r.is_jumping, continuing, starting)
    jump_time = np.where(starting, np.float32(0), jump_time)
    has_jumped = has_jumped | is_jumping
    jump_time = np.where(is_jumping | has_jumped, jump_time + dt, jump_time)

    counting = has_jumped & ~is_jumping
    air_time_since_jump = np.where(on_ground | ~counting, np.float32(0), r.air_time_since_jump + dt)

    is_boosting = (r.boost > 0) & np.where(r.is_boosting, boost_held | (r.boosting_time < rules.boost_min_time),
                                           boost_held)
    boosting_time = np.where(is_boosting, r.boosting_time + dt, np.float32(0))
    supersonic_time = np.where(p.is_supersonic, r.supersonic_time + dt, np.float32(0))
    return Replay(
        on_ground=on_ground, is_jumping=is_jumping, jump_time=jump_time.astype(np.float32), has_jumped=has_jumped,
        air_time_since_jump=air_time_since_jump.astype(np.float32), handbrake_val=handbrake_val.astype(np.float32),
        is_boosting=is_boosting, boosting_time=boosting_time.astype(np.float32),
        supersonic_time=supersonic_time.astype(np.float32), jump_held=jump, boost=r.boost, is_demoed=r.is_demoed,
    )


def reconcile(r: Replay, p: CarFacts, rules: Rules) -> Replay:
    """Where the packet states a replayed value outright (cars in play), it wins: ``has_jumped``, the
    jump in the air (``air_state``), and the air time since the jump while the flip window is open.
    The packet sends that time as 1.25 s minus it in float32, which pins it to a float32 ulp of 1.25
    (`WINDOW_ULP`); a replayed time that close to it is the exact one and is kept."""
    live = ~p.is_demoed
    in_air = live & ~r.on_ground
    stated = rules.flip_window - p.dodge_timeout.astype(np.float32)
    stated = np.where(np.abs(stated - r.air_time_since_jump) <= WINDOW_ULP, r.air_time_since_jump, stated)
    window = np.where(p.dodge_timeout >= 0, stated, np.maximum(r.air_time_since_jump, rules.flip_window))
    grounded = np.where(live, np.float32(0), r.air_time_since_jump)
    air_time_since_jump = np.where(in_air & p.has_jumped, window, grounded)
    return dataclasses.replace(
        r,
        has_jumped=np.where(live, p.has_jumped, r.has_jumped),
        is_jumping=np.where(in_air, p.air_state == JUMPING, r.is_jumping),
        air_time_since_jump=air_time_since_jump.astype(np.float32),
        boost=p.boost.copy(),
        is_demoed=p.is_demoed.copy(),
    )


WINDOW_ULP = np.float32(2.0**-23)
"""A float32 ulp of 1.25 (and of every number in [1, 2))."""


def advance(r: Replay, p: CarFacts, ticks: int, rules: Rules) -> Replay:
    """The replay after ``ticks`` more ticks that ended in packet ``p``. A car demolished before them stays
    frozen (RocketSim does not update demolished cars); on its demolition tick the air state is taken
    as unchanged (the packet reports OnGround for demolished cars); a respawned car starts fresh."""
    respawned = r.is_demoed & ~p.is_demoed
    if respawned.any():
        r = _where(respawned, start(p, rules), r)
    on_ground = np.where(p.is_demoed, r.on_ground, p.on_ground)
    new = r
    for _ in range(ticks):
        new = tick(new, p, on_ground, rules)
    if r.is_demoed.any():
        new = _where(r.is_demoed, r, new)
    return reconcile(new, p, rules)


def _where(mask: np.ndarray, a: Replay, b: Replay) -> Replay:
    """Per car slot: ``a``'s values where ``mask``, else ``b``'s."""
    fields = dataclasses.fields(Replay)
    return Replay(**{f.name: np.where(mask, getattr(a, f.name), getattr(b, f.name)) for f in fields})


# --- the adapter ----------------------------------------------------------------------------------------


class PacketAdapter:
    """GamePackets of one match -> nitro's soccar state (see the module docstring, field by field)."""

    def __init__(self, config: dict, field_pads: list[tuple[float, float]]):
        slots = config["slots"]
        self.blue, self.orange = slots["blue"], slots["orange"]
        self.num_cars = self.blue + self.orange
        arena_pads = config["pads"]
        self.pad_order = pad_order(field_pads, [(x, y) for x, y, _, _ in arena_pads])
        big = np.array([is_big for *_, is_big in arena_pads], bool)
        self.pad_respawn = np.where(big, config["constants"]["pad_cooldown_big"],
                                    config["constants"]["pad_cooldown_small"]).astype(np.float32)
        self.rules = Rules(config["constants"])
        self.players: tuple | None = None
        """(player_id, team) of the packet's players: a change starts the replay afresh."""
        self.slot_of: list[int] = []
        self.replay: Replay | None = None

    def reset(self) -> None:
        """A new episode (a kickoff): the next packet starts the replay afresh."""
        self.replay = None

    def slots(self, packet) -> list[int]:
        """The car slot of each of the packet's players (blue players fill the blue slots in packet
        order, orange players the orange slots)."""
        teams = [p.team for p in packet.players]
        blue, orange = teams.count(0), teams.count(1)
        if blue > self.blue or orange > self.orange or blue + orange != len(teams):
            raise ValueError(f"the match has {blue} blue and {orange} orange cars; this bot was exported for at "
                             f"most {self.blue} blue and {self.orange} orange (the run's team sizes)")
        seen = {0: 0, 1: 0}
        out = []
        for team in teams:
            out.append(seen[team] + (0 if team == 0 else self.blue))
            seen[team] += 1
        return out

    def update(self, packet, ticks: int) -> list[int]:
        """Read the packet, ``ticks`` ticks after the last one (any number at an episode's first), and
        advance the replay; returns each player's car slot. `state` then builds the state."""
        players = tuple((p.player_id, p.team) for p in packet.players)
        if players != self.players:
            self.players, self.replay, self.slot_of = players, None, self.slots(packet)
        c = self.num_cars
        # per slot: position, Euler angles, velocity, angular velocity, boost, dodge_timeout,
        # demolished_timeout, dodge_elapsed; has_jumped, has_double_jumped, has_dodged, is_supersonic
        floats = np.zeros((c, 16), np.float64)
        flags = np.zeros((c, 4), bool)
        air_state = np.full(c, IN_AIR)
        controls = np.zeros((c, 8), np.float32)
        active = np.zeros(c, bool)
        for slot, p in zip(self.slot_of, packet.players):
            ph = p.physics
            loc, rot, vel, ang = ph.location, ph.rotation, ph.velocity, ph.angular_velocity
            floats[slot] = (loc.x, loc.y, loc.z, rot.pitch, rot.yaw, rot.roll, vel.x, vel.y, vel.z,
                            ang.x, ang.y, ang.z, p.boost, p.dodge_timeout, p.demolished_timeout, p.dodge_elapsed)
            flags[slot] = (p.has_jumped, p.has_double_jumped, p.has_dodged, p.is_supersonic)
            air_state[slot] = int(p.air_state)
            li = p.last_input
            controls[slot] = (li.throttle, li.steer, li.pitch, li.yaw, li.roll, li.jump, li.boost, li.handbrake)
            active[slot] = True
        facts = CarFacts(on_ground=(air_state == ON_GROUND) & active, air_state=air_state, has_jumped=flags[:, 0],
                         dodge_timeout=floats[:, 13].astype(np.float32), is_demoed=(floats[:, 14] >= 0) & active,
                         is_supersonic=flags[:, 3], boost=floats[:, 12].astype(np.float32), controls=controls)
        fresh = self.replay is None
        self.replay = start(facts, self.rules) if fresh else advance(self.replay, facts, ticks, self.rules)
        self.packet, self.floats, self.flags, self.facts, self.active = packet, floats, flags, facts, active
        return self.slot_of

    def state(self) -> dict[str, np.ndarray]:
        """nitro's state [1, ...] (`STATE_FIELDS`) of the last packet `update` read. Empty slots hold
        values no builder reads (an absent car's observation block is zeros)."""
        floats, flags, facts, r = self.floats, self.flags, self.facts, self.replay
        cars = {
            "pos": floats[:, 0:3], "rot_mat": euler_to_rot_mat(floats[:, 3], floats[:, 4], floats[:, 5]),
            "vel": floats[:, 6:9], "ang_vel": floats[:, 9:12], "boost": facts.boost,
            "is_supersonic": flags[:, 3], "has_jumped": r.has_jumped, "has_double_jumped": flags[:, 1],
            "has_flipped": flags[:, 2], "flip_time": floats[:, 15], "is_flipping": facts.air_state == DODGING,
            "is_demoed": facts.is_demoed, "demo_respawn_timer": np.where(facts.is_demoed, floats[:, 14], 0.0),
            "last_controls": facts.controls, "is_on_ground": r.on_ground,
            "wheels_with_contact": np.repeat(r.on_ground[:, None], 4, 1), "is_jumping": r.is_jumping,
            "jump_time": r.jump_time, "air_time_since_jump": r.air_time_since_jump, "handbrake_val": r.handbrake_val,
            "is_boosting": r.is_boosting, "boosting_time": r.boosting_time, "supersonic_time": r.supersonic_time,
        }  # fmt: skip
        out = {f"cars.{name}": value.astype(CAR_FIELDS[name][1], copy=False)[None] for name, value in cars.items()}
        ball = self.packet.balls[0].physics
        pads_active = np.zeros(34, bool)
        timer = np.zeros(34, np.float32)
        for j, pad in zip(self.pad_order, self.packet.boost_pads):
            pads_active[j], timer[j] = pad.is_active, pad.timer
        cooldown = np.where(pads_active, np.float32(0), np.maximum(self.pad_respawn - timer, np.float32(0)))
        out.update({
            "ball.pos": _vec(ball.location)[None], "ball.vel": _vec(ball.velocity)[None],
            "ball.ang_vel": _vec(ball.angular_velocity)[None], "pads.is_active": pads_active[None],
            "pads.cooldown": cooldown[None], "active": self.active[None],
        })  # fmt: skip
        return out


def _vec(v) -> np.ndarray:
    return np.array((v.x, v.y, v.z), np.float32)


# --- the agent: tick skip, action delay, the graph -----------------------------------------------------


class Agent:
    """One car's bot: call `step` with every packet; it returns the car's 8 controls for that tick.

    A new episode starts at the first packet of a kickoff or of play after any other phase (but a
    pause): the replay, the held controls and the LSTM state restart as after an env reset. The policy
    decides on that packet and every ``tick_skip`` ticks after (counted by ``frame_num``)."""

    def __init__(self, folder: str | Path, field_pads: list[tuple[float, float]], index: int):
        folder = Path(folder)
        self.config = json.loads((folder / "nitro.json").read_text())
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(str(folder / "policy.onnx"), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        unknown = set(self.inputs) - set(STATE_FIELDS) - set(AGENT_INPUTS)
        if unknown:
            raise ValueError(f"policy.onnx reads {sorted(unknown)}, which this runtime does not provide: "
                             f"export the bot again with the nitro version that trained it")
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.adapter = PacketAdapter(self.config, field_pads)
        self.index = index
        self.tick_skip, self.delay = self.config["tick_skip"], self.config["action_delay"]
        self.hidden_size = self.config["hidden_size"]
        self.playing = False
        self.last_frame = 0
        self.controls = np.zeros(8, np.float32)
        self.obs = self.action = self.value = None
        """The last decision's observation, action and value of this car (for rendering and tests)."""

    def new_episode(self) -> None:
        c = self.adapter.num_cars
        self.adapter.reset()
        self.previous = np.zeros(8, np.float32)
        self.current = np.zeros(8, np.float32)
        self.hidden = {"hidden.h": np.zeros((c, self.hidden_size), np.float32),
                       "hidden.c": np.zeros((c, self.hidden_size), np.float32)}
        self.since_decision = None

    def step(self, packet) -> np.ndarray:
        """The car's controls [8] for this packet's tick."""
        phase = int(packet.match_info.match_phase)
        if phase not in PLAYING:
            self.playing = self.playing and phase == PAUSED
            return self.controls if phase == PAUSED else np.zeros(8, np.float32)
        frame = packet.match_info.frame_num
        ticks = frame - self.last_frame
        if self.playing and ticks == 0:  # the same frame again: nothing new happened
            return self.controls
        if not self.playing or ticks < 0:  # a new episode (or a frame counter that restarted)
            self.playing, ticks = True, 1
            self.new_episode()
        self.last_frame = frame
        slots = self.adapter.update(packet, ticks)
        self.since_decision = 0 if self.since_decision is None else self.since_decision + ticks
        if self.since_decision == 0 or self.since_decision >= self.tick_skip:
            self.since_decision = 0
            self.decide(self.adapter.state(), slots[self.index])
        wait = max(self.delay - 1, 0)  # RLBot's own 1-tick lag is the first tick of the delay
        self.controls = self.current if self.since_decision >= wait else self.previous
        return self.controls

    def decide(self, state: dict[str, np.ndarray], slot: int) -> None:
        prev_action = np.zeros((1, self.adapter.num_cars, 8), np.float32)
        prev_action[0, slot] = self.current
        feed = {**state, "prev_action": prev_action, **self.hidden}
        out = dict(zip(self.outputs, self.session.run(self.outputs, {k: feed[k] for k in self.inputs})))
        if self.hidden_size:
            self.hidden = {"hidden.h": out["hidden.h_next"], "hidden.c": out["hidden.c_next"]}
        self.previous, self.current = self.current, out["controls"][slot]
        self.obs, self.action, self.value = out["obs"][slot], out["action"][slot], out["value"][slot]
