"""`Arena`: N soccar arenas stepped together, and `tick`, the per-tick pipeline in Arena::Step order.

Reference: RocketSim (ZealanL/RocketSim, MIT) `src/Sim/Arena/Arena.cpp`. The functional core is
`tick(state, controls, world) -> (state, goal)`; `Arena` is the thin stateful shell users hold (the contract in
docs DESIGN.md, "Soccar Arena contract"), and the one place that picks how ticks run: eager, compiled,
captured in a CUDA graph, or fused into one Triton kernel (`kernels/arena.py`, the twin of this
module's tick). Cars drive, jump, flip, boost and fly against the arena through their wheels; their
bodies' contacts with the arena (`car_world`), car-ball and car-car collisions and boost pads come
with the next soccar stages.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence

import numpy as np
import torch

from nitro.core import fast, tree
from nitro.core.vector import concrete_device
from nitro.envs.soccar import ball, car, dynamics_world
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, load_arena_mesh
from nitro.envs.soccar.arena_mesh.broadphase import arena_bullet
from nitro.envs.soccar.car import CarControls
from nitro.envs.soccar.car_config import PRESETS, CarParams
from nitro.envs.soccar.kernels import arena as arena_kernels
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.state import ArenaEvents, BallState, BoostPadState, CarState, GameState, World

NUM_CONTROLS = 8  # throttle, steer, pitch, yaw, roll, jump, boost, handbrake
MODES = ("eager", "compile", "graph", "fused")


def tick(state: GameState, controls: torch.Tensor, world: World) -> tuple[GameState, torch.Tensor]:
    """One RocketSim tick (Arena::Step) of every env with ``controls`` [N, C, 8].

    Returns (state, goal [N] int8: 0, 1 blue, 2 orange). Stages that are not simulated yet are noted
    in their place; ball-only arenas skip the car stages, as RocketSim does.
    """
    params, cars = world.params, state.cars
    sleeping = ball.update_sleeping(state.ball)  # 1. ball zero-velocity sleeping
    if world.cars.num_cars:  # 2. cars' pre-tick (suspension, controls, jump, flip, air control, boost)
        car_controls = CarControls.from_tensor(controls)
        cars, forces = car.pre_tick_update(cars, car_controls, world.cars, world.mesh, state.tick_count, params)
    # 3. boost pad cooldowns (with the boost pads)
    # 4. ball pre-tick: nothing in soccar (heatseeker steering, hoops/dropshot launch)
    # 5. Bullet step: every body at its tick-start transform against the arena and each other, solved
    #    and integrated (the car-ball and car-car contacts go to the game rules: hit, bumps, demos)
    if world.cars.num_cars:
        ball_state, cars, _ = dynamics_world.step_simulation(state.ball, sleeping, cars, forces, world, params)
        cars = car.post_tick_update(cars, car_controls, params)  # 6. cars' post-tick and finish
        cars = car.finish_physics_tick(cars)  # (then each car's boost pad pickup, with the pads)
    else:
        ball_state = ball.physics_step(state.ball, sleeping, world.mesh, params)
    # 7. boost pads give boost (with the boost pads)
    ball_state = ball.finish_physics_tick(ball_state, params)  # 8. ball finish
    scored = ball.is_ball_scored(ball_state.pos, params)  # 9. goal (RocketSim fires every tick)
    goal = torch.where(scored, torch.where(ball_state.pos[:, 1] > 0, 1, 2), 0).to(torch.int8)
    state = dataclasses.replace(state, ball=ball_state, cars=cars, tick_count=state.tick_count + 1)  # 10.
    return state, goal


def fold_tick(
    state: GameState, events: ArenaEvents, controls: torch.Tensor, world: World
) -> tuple[GameState, ArenaEvents]:
    """One tick, folding its goal into ``events`` (the first scoring tick is kept)."""
    state, goal = tick(state, controls, world)
    first = (goal > 0) & (events.goal_tick < 0)
    events = dataclasses.replace(
        events,
        goal_blue=events.goal_blue | (goal == 1),
        goal_orange=events.goal_orange | (goal == 2),
        goal_tick=torch.where(first, state.tick_count, events.goal_tick),
    )
    return state, events


def step_ticks(
    state: GameState, events: ArenaEvents, controls: torch.Tensor, world: World, ticks: int
) -> tuple[GameState, ArenaEvents]:
    """``ticks`` ticks with the same controls (`fold_tick` repeated)."""
    for _ in range(ticks):
        state, events = fold_tick(state, events, controls, world)
    return state, events


class Arena:
    """N soccar arenas on one device, stepped together (RocketSim's `Arena`, batched).

    ``blue`` and ``orange`` cars per env (blue first in every [N, C, ...] car tensor), each of the
    preset ``car`` (one name, or one per car: "octane", "dominus", "plank", "breakout", "hybrid",
    "merc"); ``Arena(num_envs, blue=0, orange=0)`` is ball-only. A fresh arena's cars are fresh
    RocketSim cars: each at one of RocketSim's respawn spots (drawn from ``seed``), boost 100/3, on
    the ground. The geometry is the real soccar arena: the 16 collision meshes (see
    `nitro.envs.soccar.arena_mesh.find_soccar_meshes` for where they are looked for; there is no
    substitute arena) and RocketSim's four planes.

    ``mem_weight_mode`` (keyword-only) is RocketSim's ArenaMemWeightMode, "heavy" (its default) or
    "light": the broadphase cell size, which decides which empty contact manifolds a car has and so
    the order Bullet solves its body contacts in.

    ``mode`` (keyword-only) picks how `step` runs: "eager", "compile" (torch.compile of the K-tick
    step), "graph" (compiled and captured in a CUDA graph per distinct K; CUDA only) or "fused" (the
    whole K-tick step in one Triton kernel, `kernels.arena.launch_step_ticks_`; CUDA only; it updates
    the state tensors in place).
    """

    def __init__(
        self,
        num_envs: int,
        blue: int = 1,
        orange: int = 1,
        car: str | Sequence[str] = "octane",
        device: torch.device | str | None = None,
        tick_rate: float = C.DEFAULT_TICK_RATE,
        meshes: str | os.PathLike | None = None,
        seed: int | None = None,
        *,
        mutators: MutatorConfig | None = None,
        mode: str = "eager",
        debug: bool | None = None,
        mem_weight_mode: str = "heavy",
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        for name, count in (("blue", blue), ("orange", orange)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"{name} must be a non-negative int (cars on that team), got {count!r}")
        presets = [car] * (blue + orange) if isinstance(car, str) else list(car)
        if len(presets) != blue + orange or not all(isinstance(p, str) and p in PRESETS for p in presets):
            raise ValueError(
                f"car must be one preset name or a sequence of {blue + orange} (one per car, blue first) "
                f"from {sorted(PRESETS)}, got {car!r}"
            )
        if (
            isinstance(tick_rate, bool)
            or not isinstance(tick_rate, (int, float))
            or not (C.MIN_TICK_RATE <= tick_rate <= C.MAX_TICK_RATE)
        ):
            raise ValueError(
                f"tick_rate must be in [{C.MIN_TICK_RATE:g}, {C.MAX_TICK_RATE:g}] ticks/s "
                f"(RocketSim's range), got {tick_rate!r}"
            )
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.device = concrete_device(torch.device(device) if device is not None else torch.device("cpu"))
        if mode in ("graph", "fused") and self.device.type != "cuda" and not _triton_interpreted(mode):
            raise ValueError(f"mode={mode!r} needs a CUDA device; use mode='compile' or 'eager' on CPU")
        self.num_envs, self.num_cars, self.car, self.seed = num_envs, blue + orange, tuple(presets), seed
        self.blue, self.orange = blue, orange
        self.tick_rate = float(tick_rate)
        self.mode = mode
        self.debug = (self.device.type == "cpu") if debug is None else debug
        """Check values (NaN/inf) of controls in `step`; a host sync, so off by default on CUDA."""
        self.mutators = mutators or MutatorConfig()
        mesh = load_arena_mesh(meshes, self.device)
        self.world = World(
            mesh=mesh,
            mutators=self.mutators,
            params=TickParams.from_mutators(self.mutators, _float32(1.0 / _float32(self.tick_rate))),
            cars=CarParams.build(presets, self.device),
            bullet=arena_bullet(mesh, mem_weight_mode),
        )
        self.state = GameState(
            ball=BallState.rest(num_envs, self.device),
            cars=self._respawned_cars(),
            pads=BoostPadState.fresh(num_envs, self.device),
            tick_count=torch.zeros(num_envs, dtype=torch.int64, device=self.device),
        )
        self._generator = torch.Generator(device=self.device)
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(seed)
        self.kickoff_spawns = torch.full((num_envs, self.num_cars), -1, dtype=torch.int64, device=self.device)
        """Each car's spot from the last `reset_kickoff`, -1 before one: 0-4 index RocketSim's
        CAR_SPAWN_LOCATIONS_SOCCAR (blue's; orange's are mirrored), 5 and up the respawn spots of a
        team's sixth and later cars."""
        self._runners: dict[int, object] = {}

    # --- views -----------------------------------------------------------------------------------

    @property
    def ball(self) -> BallState:
        """The balls: ``pos``, ``vel``, ``ang_vel`` [N, 3] (UU, UU/s, rad/s), ``rot_mat`` [N, 3, 3]."""
        return self.state.ball

    @property
    def cars(self) -> CarState:
        """The cars, blue first then orange: [N, C, ...]."""
        return self.state.cars

    @property
    def pads(self) -> BoostPadState:
        return self.state.pads

    @property
    def mesh(self) -> ArenaMesh:
        return self.world.mesh

    @property
    def tick_time(self) -> float:
        return self.world.params.tick_time

    # --- setting state ---------------------------------------------------------------------------

    def set_ball(self, pos=None, vel=None, ang_vel=None, env_ids=None) -> None:
        """Set the ball of the selected envs (all when ``env_ids`` is None).

        Each value is [M, 3] for the M selected envs, or [3] for all of them, float32 on the arena's
        device (lists are converted). Unspecified fields keep their values. Hidden per-tick state
        (the cached hit impulse, ticks since update) is reset as in a fresh RocketSim arena, so the
        same state set in both simulators evolves the same way. A ball set to zero linear and angular
        velocity sleeps until moved (RocketSim's kickoff freeze).
        """
        rows = self._env_rows(env_ids)
        count = self.num_envs if rows is None else rows.numel()
        b = self.state.ball
        new = dataclasses.replace(b)
        for name, value in (("pos", pos), ("vel", vel), ("ang_vel", ang_vel)):
            if value is not None:
                setattr(new, name, _scatter(getattr(b, name), rows, self._vec3(name, value, count)))
        new.velocity_impulse_cache = _scatter(
            b.velocity_impulse_cache, rows, torch.zeros(count, 3, device=self.device)
        )
        new.tick_count_since_update = _scatter(
            b.tick_count_since_update, rows, torch.zeros(count, dtype=torch.int64, device=self.device)
        )
        self.state = dataclasses.replace(self.state, ball=new)

    def set_car(self, index: int, env_ids=None, **fields) -> None:
        """Set car ``index`` (blue cars first) of the selected envs (all when ``env_ids`` is None).

        Keywords are CarState fields under RocketSim's binding names (``pos``, ``rot_mat``, ``vel``,
        ``ang_vel``, ``boost``, ``is_on_ground``, ``has_jumped``, ..., ``last_controls``; see
        `CarState`). Each value is [M, ...] for the M selected envs or one value for all of them,
        on the arena's device (lists are converted), float32 for float fields, bool for flags.
        Unspecified fields keep their values. As RocketSim's `Car::SetState` on a fresh car, the
        hidden per-tick state (wheel forces and frictions, extra pushback, boosting flag, cached
        bump velocity) is reset and ``tick_count_since_update`` restarts at 0, so the same state set
        in both simulators evolves the same way.
        """
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.num_cars:
            raise ValueError(f"car index must be an int in [0, {self.num_cars}), got {index!r}")
        for name in fields:
            if name not in CarState.SETTABLE:
                raise ValueError(
                    f"set_car got {name!r}, which is not a settable CarState field; expected any of "
                    f"{list(CarState.SETTABLE)}"
                )
        rows = self._env_rows(env_ids)
        count = self.num_envs if rows is None else rows.numel()
        self._write_car(index, rows, {name: self._car_field(name, value, count) for name, value in fields.items()})

    def _write_car(self, index: int, rows: torch.Tensor | None, values: dict[str, torch.Tensor]) -> None:
        """Car::SetState of car ``index`` in ``rows`` (all when None): the checked ``values`` [M, ...],
        the hidden state of a fresh car, ``tick_count_since_update`` 0. No host synchronisation."""
        count = self.num_envs if rows is None else rows.numel()
        fresh = CarState.fresh(count, 1, self.device)
        values = {name: getattr(fresh, name)[:, 0] for name in CarState.HIDDEN + ("tick_count_since_update",)} | values
        cars = self.state.cars
        new = dataclasses.replace(cars)
        for name, value in values.items():
            column = getattr(cars, name)[:, index]
            setattr(new, name, _set_column(getattr(cars, name), index, _scatter(column, rows, value)))
        self.state = dataclasses.replace(self.state, cars=new)

    def _respawned_cars(self) -> CarState:
        """Fresh cars as RocketSim's `Arena::AddCar` makes them: `Car::Respawn` at a random respawn
        spot (z = 36, facing the field; orange mirrored), boost = the spawn amount."""
        n, c = self.num_envs, self.num_cars
        cars = CarState.fresh(n, c, self.device)
        generator = torch.Generator().manual_seed(self.seed) if self.seed is not None else None
        spot = torch.randint(len(C.CAR_RESPAWN_LOCATIONS_SOCCAR), (n, c), generator=generator)
        x, y, yaw = torch.tensor(C.CAR_RESPAWN_LOCATIONS_SOCCAR, dtype=torch.float64)[spot].unbind(-1)
        orange = torch.arange(c) >= self.blue
        y = torch.where(orange, -y, y)
        yaw = torch.where(orange, yaw + torch.pi, yaw)
        cars.pos = torch.stack((x, y, torch.full_like(x, C.CAR_RESPAWN_Z)), -1).float().to(self.device)
        cars.rot_mat = angle_to_rot_mat(yaw.float(), torch.zeros(n, c), torch.zeros(n, c)).to(self.device)
        cars.boost[:] = self.world.mutators.car_spawn_boost_amount
        return cars

    def reset_kickoff(self, env_ids=None) -> None:
        """RocketSim's `Arena::ResetToRandomKickoff` for the selected envs (all when None).

        The ball at rest at (0, 0, BALL_REST_Z) (so it sleeps until touched); each env shuffles the
        five kickoff spots from its own random stream (from ``seed``), and the i-th car of each team
        takes spot i (orange mirrored through (-x, -y), facing the other way); cars past the fifth
        per team go to the respawn spots, 250 UU further back for each car already there. Cars are
        set as fresh RocketSim cars at z = 17 on the ground with the spawn boost (flags, timers and
        hidden state cleared); pads are active. The chosen spots are in `kickoff_spawns`.
        """
        rows = self._env_rows(env_ids)
        count = self.num_envs if rows is None else rows.numel()
        rest = BallState.rest(count, self.device)
        self.set_ball(pos=rest.pos, vel=rest.vel, ang_vel=rest.ang_vel, env_ids=rows)
        fresh = BoostPadState.fresh(count, self.device)
        pads = BoostPadState(
            is_active=_scatter(self.state.pads.is_active, rows, fresh.is_active),
            cooldown=_scatter(self.state.pads.cooldown, rows, fresh.cooldown),
        )
        self.state = dataclasses.replace(self.state, pads=pads)
        if not self.num_cars:
            return
        order = torch.rand(count, len(C.CAR_SPAWN_LOCATIONS_SOCCAR), generator=self._generator, device=self.device)
        spots = _kickoff_spots(order.argsort(-1), self.blue, self.orange)  # [count, C]
        self.kickoff_spawns = _scatter(self.kickoff_spawns, rows, spots)
        table = torch.tensor(_kickoff_table(max(self.blue, self.orange)), dtype=torch.float32, device=self.device)
        x, y, yaw = table[spots].unbind(-1)
        orange = torch.arange(self.num_cars, device=self.device) >= self.blue
        pos = torch.stack((torch.where(orange, -x, x), torch.where(orange, -y, y), torch.full_like(x, C.CAR_SPAWN_REST_Z)), -1)
        yaw = torch.where(orange, (yaw.double() + math.pi).float(), yaw)  # Angle::yaw += M_PI
        rot_mat = angle_to_rot_mat(yaw, torch.zeros_like(yaw), torch.zeros_like(yaw))
        cars = CarState.fresh(count, self.num_cars, self.device)  # flags, timers: a fresh CarState's
        cars.pos, cars.rot_mat = pos, rot_mat
        cars.boost = torch.full_like(x, self.world.mutators.car_spawn_boost_amount)
        for index in range(self.num_cars):
            self._write_car(index, rows, {name: getattr(cars, name)[:, index] for name in CarState.SETTABLE})

    # --- stepping --------------------------------------------------------------------------------

    def step(self, controls: torch.Tensor | None = None, ticks: int = 1) -> ArenaEvents:
        """Advance every env by ``ticks`` ticks with ``controls`` [N, C, 8] held throughout.

        Controls are float32 in the order throttle, steer, pitch, yaw, roll, jump, boost, handbrake
        (jump, boost, handbrake > 0.5 mean pressed); ball-only arenas take None or an [N, 0, 8] tensor.
        Returns the events of the stepped ticks, per env.
        """
        if isinstance(ticks, bool) or not isinstance(ticks, int) or ticks < 1:
            raise ValueError(f"ticks must be a positive int, got {ticks!r}")
        self._check_controls(controls)
        events = ArenaEvents.none(self.num_envs, self.num_cars, self.device)
        if controls is None:
            controls = torch.zeros(self.num_envs, 0, NUM_CONTROLS, device=self.device)
        if self.mode == "fused":
            arena_kernels.launch_step_ticks_(self.state, events, controls, self.world, ticks)
            return events
        if self.mode == "eager":
            self.state, events = step_ticks(self.state, events, controls, self.world, ticks)
            return events
        runner = self._runners.get(ticks)
        if runner is None:
            runner = self._runners[ticks] = _Runner(self.world, ticks, self.mode, self.state, events, controls)
        self.state, events = runner(self.state, events, controls)
        return events

    # --- validation ------------------------------------------------------------------------------

    def _env_rows(self, env_ids) -> torch.Tensor | None:
        if env_ids is None:
            return None
        ids = env_ids if isinstance(env_ids, torch.Tensor) else torch.as_tensor(env_ids)
        if ids.dtype == torch.bool:
            if ids.shape != (self.num_envs,):
                raise ValueError(
                    f"a boolean env_ids mask must have shape ({self.num_envs},), got {tuple(ids.shape)}"
                )
            ids = ids.nonzero().flatten()
        if (
            ids.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
            or ids.dim() != 1
        ):
            raise ValueError(
                f"env_ids must be a 1-D integer tensor/list or a [N] bool mask, got dtype "
                f"{ids.dtype} shape {tuple(ids.shape)}"
            )
        ids = ids.to(device=self.device, dtype=torch.int64)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_envs):
            raise ValueError(
                f"env_ids must be in [0, {self.num_envs}), got values from {int(ids.min())} "
                f"to {int(ids.max())}"
            )
        return ids

    def _vec3(self, name: str, value, count: int) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value, dtype=torch.float32, device=self.device)
        if value.device != self.device:
            raise ValueError(
                f"{name} is on {value.device}, the arena is on {self.device}; "
                f"pass {name}.to({str(self.device)!r})"
            )
        if value.dtype != torch.float32:
            raise ValueError(f"{name} must be float32, got {value.dtype}; pass {name}.float()")
        if value.shape == (3,):
            value = value.expand(count, 3)
        if value.shape != (count, 3):
            raise ValueError(
                f"{name} must have shape ({count}, 3) (one row per selected env) or (3,), "
                f"got {tuple(value.shape)}"
            )
        if not bool(torch.isfinite(value).all()):
            raise ValueError(f"{name} has NaN or infinite values; every {name} must be finite")
        return value

    def _car_field(self, name: str, value, count: int) -> torch.Tensor:
        """A set_car value checked against CarState.FIELDS, broadcast to [count, ...]."""
        shape, dtype = CarState.FIELDS[name]
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value, dtype=dtype, device=self.device)
        if value.device != self.device:
            raise ValueError(
                f"{name} is on {value.device}, the arena is on {self.device}; pass {name}.to({str(self.device)!r})"
            )
        integer = not value.dtype.is_floating_point and value.dtype != torch.bool
        if value.dtype != dtype and not (integer and dtype in (torch.int32, torch.int64)):
            raise ValueError(f"{name} must be {dtype}, got {value.dtype}")
        if tuple(value.shape) == shape:
            value = value.expand(count, *shape)
        if tuple(value.shape) != (count, *shape):
            raise ValueError(
                f"{name} must have shape {(count, *shape)} (one row per selected env) or {shape}, "
                f"got {tuple(value.shape)}"
            )
        if dtype == torch.float32 and not bool(torch.isfinite(value).all()):  # sync-ok: set_car is off the hot path
            raise ValueError(f"{name} has NaN or infinite values; every {name} must be finite")
        return value.to(dtype)

    def _check_controls(self, controls) -> None:
        if controls is None:
            if self.num_cars:
                raise ValueError(
                    f"controls are required: a float32 tensor [{self.num_envs}, {self.num_cars}, 8]"
                )
            return
        if not isinstance(controls, torch.Tensor):
            raise ValueError(
                f"controls must be a torch.Tensor [{self.num_envs}, {self.num_cars}, 8], "
                f"got {type(controls).__name__}"
            )
        expected = (self.num_envs, self.num_cars, NUM_CONTROLS)
        if tuple(controls.shape) != expected:
            raise ValueError(
                f"controls must have shape {expected} (envs, cars, [throttle, steer, pitch, "
                f"yaw, roll, jump, boost, handbrake]), got {tuple(controls.shape)}"
            )
        if controls.dtype != torch.float32:
            raise ValueError(f"controls must be float32, got {controls.dtype}; pass controls.float()")
        if controls.device != self.device:
            raise ValueError(
                f"controls are on {controls.device}, the arena is on {self.device}; "
                f"pass controls.to({str(self.device)!r})"
            )
        if self.debug and controls.numel() and not bool(torch.isfinite(controls).all()):
            raise ValueError("controls have NaN or infinite values")


class _Runner:
    """``ticks`` compiled ticks per call (one tick compiled, and in graph mode the K ticks captured in
    one CUDA graph), through nitro's fast path (`nitro.core.fast.Loop`)."""

    def __init__(self, world, ticks: int, mode: str, state: GameState, events: ArenaEvents, controls):
        self.loop = fast.Loop(
            lambda carry: (*fold_tick(carry[0], carry[1], carry[2], world), carry[2]),
            (state, events, controls),
            steps=ticks,
            mode="compile" if mode == "compile" else "graph",
        )

    def __call__(self, state: GameState, events: ArenaEvents, controls: torch.Tensor):
        carry = self.loop.carry
        if self.loop.graph is None:
            self.loop.carry = (state, events, controls)
        elif carry[0] is not state:  # the state was set from outside: load it into the static buffers
            tree.copy_(carry, (state, events, controls))
        else:
            tree.copy_(carry[1:], (events, controls))
        state, events, _ = self.loop()
        return state, events


def _triton_interpreted(mode: str) -> bool:
    """The fused kernel also runs on CPU tensors under TRITON_INTERPRET=1 (for tests)."""
    return mode == "fused" and os.environ.get("TRITON_INTERPRET") == "1"


def _scatter(base: torch.Tensor, rows: torch.Tensor | None, values: torch.Tensor) -> torch.Tensor:
    """``base`` with ``values`` written at ``rows`` (all rows when None), as a new tensor."""
    if rows is None:
        return values.to(base.dtype).expand_as(base).clone()
    out = base.clone()
    out[rows] = values.to(base.dtype)
    return out


def _set_column(base: torch.Tensor, index: int, column: torch.Tensor) -> torch.Tensor:
    """``base`` [N, C, ...] with car ``index`` replaced by ``column`` [N, ...], as a new tensor."""
    out = base.clone()
    out[:, index] = column
    return out


def _kickoff_table(team_size: int) -> list[tuple[float, float, float]]:
    """(x, y, yaw) of blue's kickoff spots: the five of CAR_SPAWN_LOCATIONS_SOCCAR, then one row per
    car past the fifth of a team (Arena::ResetToRandomKickoff: the respawn spots in turn, each taken
    again CAR_SPAWN_EXTRA_OFFSET_Y further along y). Values are RocketSim's float32 table entries."""
    spawns = len(C.CAR_SPAWN_LOCATIONS_SOCCAR)
    rows = [tuple(float(np.float32(v)) for v in spot) for spot in C.CAR_SPAWN_LOCATIONS_SOCCAR]
    taken = [0] * len(C.CAR_RESPAWN_LOCATIONS_SOCCAR)
    for i in range(spawns, team_size):
        # RocketSim takes (i - 5) % 5 over its 4 respawn spots (out of bounds from the tenth car on);
        # we wrap over the 4.
        k = (i - spawns) % len(taken)
        x, y, yaw = C.CAR_RESPAWN_LOCATIONS_SOCCAR[k]
        rows.append((x, y + C.CAR_SPAWN_EXTRA_OFFSET_Y * taken[k], float(np.float32(yaw))))
        taken[k] += 1
    return rows


def _kickoff_spots(order: torch.Tensor, blue: int, orange: int) -> torch.Tensor:
    """Each car's row of `_kickoff_table` [M, C]: the i-th car of each team takes the env's shuffled
    kickoff spot ``order[:, i]`` [M, 5], or past the fifth its own respawn row."""
    spawns = order.shape[1]
    columns = []
    for i in list(range(blue)) + list(range(orange)):
        columns.append(order[:, i] if i < spawns else torch.full_like(order[:, 0], i))
    return torch.stack(columns, -1)


def _float32(x: float) -> float:
    return float(np.float32(x))


__all__ = ["MODES", "NUM_CONTROLS", "Arena", "ArenaEvents", "World", "fold_tick", "step_ticks", "tick"]
