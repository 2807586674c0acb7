"""`Arena`: N soccar arenas stepped together, and `tick`, the per-tick pipeline in Arena::Step order.

Reference: RocketSim (ZealanL/RocketSim, MIT) `src/Sim/Arena/Arena.cpp`. The functional core is
`tick(state, controls, world) -> (state, events)`; `Arena` is the thin stateful shell users hold (the
contract in docs DESIGN.md, "Soccar Arena contract"), and the one place that picks how ticks run:
eager, compiled, captured in a CUDA graph, or fused into Triton stage kernels (`kernels/arena.py`, the
twin of this module's tick, with the differences its docstring lists). Cars drive, jump, flip, boost
and fly against the arena through their wheels; their bodies collide with the arena, the ball and
each other in Bullet's joint step (`dynamics_world`), whose contacts fire RocketSim's callbacks: hits
on the ball (`ball_hit`), bumps and demolitions (`car_bump`). Cars pick up boost (`boost_pads`),
respawn, kick off and score (`rules`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np
import torch

from nitro.core import fast, tree
from nitro.core.vector import concrete_device
from nitro.envs.soccar import ball, ball_hit, boost_pads, car, car_bump, dynamics_world, rules, vehicle
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, load_arena_mesh
from nitro.envs.soccar.arena_mesh.broadphase import arena_bullet
from nitro.envs.soccar.car import CarControls
from nitro.envs.soccar.car_config import PRESETS, CarParams
from nitro.envs.soccar.kernels import arena as arena_kernels
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.state import (
    ArenaEvents,
    BallState,
    BoostPadConfig,
    BoostPadState,
    CarState,
    GameState,
    World,
)

NUM_CONTROLS = 8  # throttle, steer, pitch, yaw, roll, jump, boost, handbrake
MODES = ("eager", "compile", "graph", "fused")


def tick(state: GameState, controls: torch.Tensor, world: World) -> tuple[GameState, ArenaEvents]:
    """One RocketSim tick (Arena::Step) of every env with ``controls`` [N, C, 8].

    Returns the state and the tick's events (`rules.tick_events`). Ball-only arenas skip the car
    and pad stages, as RocketSim does.
    """
    params, cars, pads, game = world.params, state.cars, state.pads, world.game
    no_car = torch.full(cars.is_demoed.shape, -1, dtype=torch.int32, device=cars.pos.device)
    touched, bumped_by, demoed_by, pickup_pad = cars.is_demoed & False, no_car, no_car, no_car
    sleeping = ball.update_sleeping(state.ball)  # 1. ball zero-velocity sleeping
    ball_state = state.ball
    if world.cars.num_cars:
        # 2. cars' pre-tick: a demolished car's countdown and respawn, then the rest for the others,
        #    whose wheel rays meet the arena, the other cars and the ball as they stand now
        frozen = cars.is_demoed  # Bullet skips these bodies this tick (respawning ones too)
        bodies = vehicle.Bodies.of(cars, ball_state, world.cars, params)
        cars = rules.update_demo(cars, state.tick_count, world)
        car_controls = CarControls.from_tensor(controls)
        cars, forces = car.pre_tick_update(
            cars, car_controls, world.cars, world.mesh, bodies, state.tick_count, params
        )
        pads = boost_pads.pre_tick_update(pads, params)  # 3. boost pad cooldowns
        # 4. ball pre-tick: nothing in soccar (heatseeker steering, hoops/dropshot launch)
        # 5. Bullet step: collision detection at the tick-start transforms (cars demolished at the
        #    tick's start, respawned ones included, take no part), then RocketSim's callback for each
        #    added contact: the car-ball hits (Ball::_OnHit) and the car-car bumps and demolitions;
        #    then the solve and integration (a car demolished by a callback runs to the step's end)
        found = dynamics_world.perform_discrete_collision_detection(
            state.ball, sleeping, cars, forces, world, params, alive=~frozen
        )
        hits = found.contacts.car_ball.hits()
        ball_state, cars = ball_hit.on_hit(ball_state, found.ball_vel, cars, hits, state.tick_count, params)
        touched = hits.is_hit
        cars, bumped_by, demoed_by = car_bump.on_car_car_collision(cars, found.contacts.car_car.touches(), game, params)
        ball_state, cars = dynamics_world.solve_constraints(ball_state, cars, found, world, params)
        cars = car.post_tick_update(cars, car_controls, params)  # 6. cars' post-tick and finish,
        cars = car.finish_physics_tick(cars)
        locked = boost_pads.check_collision(pads, cars, world.cars, world.pads)  # then pad pickups
        pads, cars, pickup_pad = boost_pads.post_tick_update(pads, cars, locked, world.pads, params)  # 7.
    else:
        ball_state = ball.physics_step(ball_state, sleeping, world.mesh, params)  # 5. (the ball alone)
    ball_state = ball.finish_physics_tick(ball_state, params)  # 8. ball finish
    goal = rules.is_ball_scored(ball_state.pos, params)  # 9. goal (RocketSim fires every scoring tick)
    state = dataclasses.replace(state, ball=ball_state, cars=cars, pads=pads, tick_count=state.tick_count + 1)  # 10.
    state = rules.count_goals(state, goal)
    events = rules.tick_events(goal, state.tick_count, touched, demoed_by, bumped_by, pickup_pad)
    if game.kickoff_after_goal:  # nitro's option: a kickoff after each goal
        state, _ = rules.reset_kickoff(state, world, goal > 0)
    return state, events


def fold_tick(
    state: GameState, events: ArenaEvents, controls: torch.Tensor, world: World
) -> tuple[GameState, ArenaEvents]:
    """One tick, folding its events into ``events`` (`rules.fold_events`)."""
    state, new = tick(state, controls, world)
    return state, rules.fold_events(events, new)


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

    ``seed`` (0 .. 2^32 - 1; drawn at random when None) seeds every env's own random streams: the
    kickoff shuffles and respawn spots (`rules`). ``kickoff_after_goal`` (keyword-only) resets an env
    to a kickoff at the end of each tick on which it scores (RocketSim leaves the ball in the goal).

    ``mem_weight_mode`` (keyword-only) is RocketSim's ArenaMemWeightMode, "heavy" (its default) or
    "light": the broadphase cell size, which decides which empty contact manifolds a car has and so
    the order Bullet solves its body contacts in.

    ``mode`` (keyword-only) picks how `step` runs: "eager", "compile" (torch.compile of the K-tick
    step), "graph" (compiled and captured in a CUDA graph per distinct K; CUDA only) or "fused" (the
    K-tick step in Triton stage kernels, `kernels.arena.launch_step_ticks_`; CUDA only; it updates the
    state tensors in place, and from the second step over the same state tensors replays the step as
    one CUDA graph). The fused kernel approximates the tick in arenas with cars: the
    contacts between bodies (the car-ball sphere-box closed form, the car pairs' separating axes with
    their deepest corners: `car_contacts`) are solved alone, then each body's arena contacts (a car
    body's from Bullet's GJK, separating axes where Bullet runs EPA, the planes' exactly as Bullet's) starting from their deltas, where
    Bullet solves every row together; its wheel rays meet the arena, the other cars and the
    ball as the reference's do, and it fires the hits, bumps
    and demolitions from those same contacts (docs/SOCCAR.md); ball-only arenas are the same tick in
    every mode.
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
        kickoff_after_goal: bool = False,
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
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
            raise ValueError(f"seed must be an int in [0, 2**32) or None, got {seed!r}")
        if not isinstance(kickoff_after_goal, bool):
            raise ValueError(f"kickoff_after_goal must be a bool, got {kickoff_after_goal!r}")
        if mutators is not None and not isinstance(mutators, MutatorConfig):
            raise ValueError(f"mutators must be a MutatorConfig, got {type(mutators).__name__}")
        self.device = concrete_device(torch.device(device) if device is not None else torch.device("cpu"))
        if mode in ("graph", "fused") and self.device.type != "cuda" and not _triton_interpreted(mode):
            raise ValueError(f"mode={mode!r} needs a CUDA device; use mode='compile' or 'eager' on CPU")
        seed = int(torch.randint(2**32, ()).item()) if seed is None else seed  # sync-ok: construction
        self.num_envs, self.num_cars, self.car, self.seed = num_envs, blue + orange, tuple(presets), seed
        self.blue, self.orange = blue, orange
        self.tick_rate = float(tick_rate)
        self.mode = mode
        self.debug = (self.device.type == "cpu") if debug is None else debug
        """Check values (NaN/inf) of controls in `step` and of `set_ball` / `set_car` values; a host sync,
        so off by default on CUDA (auto-resetting RL envs set cars every step)."""
        self.mutators = mutators or MutatorConfig()
        mesh = load_arena_mesh(meshes, self.device)
        self.world = World(
            mesh=mesh,
            mutators=self.mutators,
            params=TickParams.from_mutators(self.mutators, _float32(1.0 / _float32(self.tick_rate))),
            cars=CarParams.build(presets, self.device),
            pads=BoostPadConfig.soccar(self.device),
            game=rules.game_config(blue, orange, seed, kickoff_after_goal, self.device),
            bullet=arena_bullet(mesh, mem_weight_mode),
        )
        env = torch.arange(num_envs, device=self.device)
        self.state = GameState(
            ball=BallState.rest(num_envs, self.device),
            cars=rules.respawned_cars(self.world, env, torch.full_like(env, -1)),  # Arena::AddCar's respawn
            pads=BoostPadState.fresh(num_envs, self.device),
            tick_count=torch.zeros(num_envs, dtype=torch.int64, device=self.device),
            **GameState.scoreboard(num_envs, self.device),
        )
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
        """The 34 pads in RocketSim's order: ``is_active``, ``cooldown`` [N, 34] (`pad_rlbot_order`
        maps to RLBot's order)."""
        return self.state.pads

    @property
    def pad_positions(self) -> torch.Tensor:
        """Pad centres in RocketSim's order, UU [34, 3]."""
        return self.world.pads.pos

    @property
    def pad_is_big(self) -> torch.Tensor:
        """[34] bool, RocketSim's order."""
        return self.world.pads.is_big

    @property
    def pad_rlbot_order(self) -> torch.Tensor:
        """RocketSim's index of RLBot's (and RLGym's) k-th pad [34]: ``pads.is_active[:, order]``."""
        return torch.tensor(C.BOOST_PAD_RLBOT_ORDER, device=self.device)

    @property
    def blue_score(self) -> torch.Tensor:
        """Goals blue scored [N] int32 (the binding's count: once per run of scoring ticks)."""
        return self.state.blue_score

    @property
    def orange_score(self) -> torch.Tensor:
        return self.state.orange_score

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

    def reset_kickoff(self, env_ids=None) -> None:
        """RocketSim's `Arena::ResetToRandomKickoff` for the selected envs (all when None).

        The ball at rest at (0, 0, BALL_REST_Z) (so it sleeps until touched); each env shuffles the
        five kickoff spots from its own random stream (from ``seed``), and the i-th car of each team
        takes spot i (orange mirrored through (-x, -y), facing the other way); cars past the fifth
        per team go to the respawn spots, 250 UU further back for each car already there. Cars are
        set as RocketSim's Car::SetState sets them: fresh CarStates at z = 17 on the ground with the
        spawn boost (flags, timers, ball hit info cleared; btVehicleRL's wheel infos kept); pads
        are fresh. The chosen spots are in `kickoff_spawns`.
        """
        rows = self._env_rows(env_ids)
        mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if rows is not None:
            mask = torch.zeros_like(mask).index_fill_(0, rows, True)
        self.state, spots = rules.reset_kickoff(self.state, self.world, mask)
        self.kickoff_spawns = torch.where(mask[:, None], spots, self.kickoff_spawns)

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
            if self.device.type != "cuda":  # Triton's interpreter (the tests)
                arena_kernels.launch_step_ticks_(self.state, events, controls, self.world, ticks)
                return events
            runner = self._runners.get(ticks)
            if runner is None:
                runner = self._runners[ticks] = _FusedGraph(self.world, ticks)
            return runner(self.state, events, controls)
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
        if self.debug and not bool(torch.isfinite(value).all()):  # sync-ok: debug check
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
        if self.debug and dtype == torch.float32 and not bool(torch.isfinite(value).all()):  # sync-ok: debug check
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


class _FusedGraph:
    """The fused K-tick step (`kernels.arena.launch_step_ticks_`) captured in one CUDA graph, replayed
    while the state's tensors lie where they lay at the capture: the host launches one graph instead of
    nine stage kernels of some fifty arguments per tick. A step whose state tensors moved (a new state, a
    `set_car`) launches its kernels directly, and the next step over the same tensors captures anew."""

    def __init__(self, world: World, ticks: int):
        self.world, self.ticks = world, ticks
        self.where: tuple | None = None  # the state's tensors' places, as the last step found them
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self, state: GameState, events: ArenaEvents, controls: torch.Tensor) -> ArenaEvents:
        where = tuple((x.data_ptr(), x.shape, x.stride()) for x in tree.leaves(state))
        if where != self.where:
            self.where, self.graph = where, None
            arena_kernels.launch_step_ticks_(state, events, controls, self.world, self.ticks)
            return events
        if self.graph is None:
            self.controls, self.events, self.none = controls.contiguous().clone(), tree.clone(events), events
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                tree.copy_(self.events, self.none)
                arena_kernels.launch_step_ticks_(state, self.events, self.controls, self.world, self.ticks)
        self.controls.copy_(controls)
        self.graph.replay()
        return tree.clone(self.events)  # the caller's own: the next replay rewrites the graph's


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


def _float32(x: float) -> float:
    return float(np.float32(x))


__all__ = ["MODES", "NUM_CONTROLS", "Arena", "ArenaEvents", "World", "fold_tick", "step_ticks", "tick"]
