"""`Arena`: N soccar arenas stepped together, and `tick`, the per-tick pipeline in Arena::Step order.

Reference: RocketSim (ZealanL/RocketSim, MIT) `src/Sim/Arena/Arena.cpp`. The functional core is
`tick(state, world) -> (state, goal)`; `Arena` is the thin stateful shell users hold (the contract in
docs DESIGN.md, "Soccar Arena contract"), and the one place that picks how ticks run: eager, compiled,
captured in a CUDA graph, or fused into one Triton kernel (`kernels/arena.py`, the twin of this
module's tick). This stage of the port simulates ball-only arenas (``Arena(n, blue=0, orange=0)``);
the cars come with the roadmap's "Soccar cars" work.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import torch

from nitro.core import fast, tree
from nitro.core.vector import concrete_device
from nitro.envs.soccar import ball
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, load_arena_mesh
from nitro.envs.soccar.kernels import arena as arena_kernels
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.state import ArenaEvents, BallState, BoostPadState, CarState, GameState, World

NUM_CONTROLS = 8  # throttle, steer, pitch, yaw, roll, jump, boost, handbrake
MODES = ("eager", "compile", "graph", "fused")


def tick(state: GameState, world: World) -> tuple[GameState, torch.Tensor]:
    """One RocketSim tick (Arena::Step) of every env. Returns (state, goal [N] int8: 0, 1 blue, 2 orange).

    Stages without cars are noted in order and skipped, as RocketSim skips them for ball-only arenas.
    """
    params = world.params
    sleeping = ball.update_sleeping(state.ball)  # 1. ball zero-velocity sleeping
    # 2. cars' pre-tick (suspension, controls, jump, flip, air control, boost): no cars
    # 3. boost pad cooldowns: only with cars (Arena::Step skips them for ball-only arenas)
    # 4. ball pre-tick: nothing in soccar (heatseeker steering, hoops/dropshot launch)
    ball_state = ball.physics_step(state.ball, sleeping, world.mesh, params)  # 5. Bullet step
    # 6. cars' post-tick, finish and boost pad pickups: no cars
    # 7. boost pads give boost: no cars
    ball_state = ball.finish_physics_tick(ball_state, params)  # 8. ball finish
    scored = ball.is_ball_scored(ball_state.pos, params)  # 9. goal (RocketSim fires every tick)
    goal = torch.where(scored, torch.where(ball_state.pos[:, 1] > 0, 1, 2), 0).to(torch.int8)
    state = dataclasses.replace(state, ball=ball_state, tick_count=state.tick_count + 1)  # 10.
    return state, goal


def fold_tick(state: GameState, events: ArenaEvents, world: World) -> tuple[GameState, ArenaEvents]:
    """One tick, folding its goal into ``events`` (the first scoring tick is kept)."""
    state, goal = tick(state, world)
    first = (goal > 0) & (events.goal_tick < 0)
    events = dataclasses.replace(
        events,
        goal_blue=events.goal_blue | (goal == 1),
        goal_orange=events.goal_orange | (goal == 2),
        goal_tick=torch.where(first, state.tick_count, events.goal_tick),
    )
    return state, events


def step_ticks(
    state: GameState, events: ArenaEvents, world: World, ticks: int
) -> tuple[GameState, ArenaEvents]:
    """``ticks`` ticks (`fold_tick` repeated)."""
    for _ in range(ticks):
        state, events = fold_tick(state, events, world)
    return state, events


class Arena:
    """N soccar arenas on one device, stepped together (RocketSim's `Arena`, batched).

    ``Arena(num_envs, blue=0, orange=0)`` is a ball-only arena (what this stage of the port runs);
    cars raise NotImplementedError until they land (ROADMAP: "Soccar cars"). The geometry is the real
    soccar arena: the 16 collision meshes (see `nitro.envs.soccar.arena_mesh.find_soccar_meshes` for where
    they are looked for; there is no substitute arena) and RocketSim's four planes.

    ``mode`` (keyword-only) picks how `step` runs: "eager", "compile" (torch.compile of the K-tick
    step), "graph" (compiled and captured in a CUDA graph per distinct K; CUDA only) or "fused" (the
    whole K-tick step in one Triton kernel, `kernels.arena.launch_step_ticks_`; CUDA only, ball-only arenas; it
    updates the state tensors in place).
    """

    def __init__(
        self,
        num_envs: int,
        blue: int = 1,
        orange: int = 1,
        car: str = "octane",
        device: torch.device | str | None = None,
        tick_rate: float = C.DEFAULT_TICK_RATE,
        meshes: str | os.PathLike | None = None,
        seed: int | None = None,
        *,
        mutators: MutatorConfig | None = None,
        mode: str = "eager",
        debug: bool | None = None,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        for name, count in (("blue", blue), ("orange", orange)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"{name} must be a non-negative int (cars on that team), got {count!r}")
        if blue or orange:
            raise NotImplementedError(
                f"Arena(blue={blue}, orange={orange}): cars are not simulated yet; they arrive with the "
                "roadmap's 'Soccar cars' work. Use Arena(num_envs, blue=0, orange=0) for ball-only arenas."
            )
        if not isinstance(car, str):
            raise ValueError(f"car must be a preset name such as 'octane', got {car!r}")
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
        self.num_envs, self.num_cars, self.car, self.seed = num_envs, blue + orange, car, seed
        self.tick_rate = float(tick_rate)
        self.mode = mode
        self.debug = (self.device.type == "cpu") if debug is None else debug
        """Check values (NaN/inf) of controls in `step`; a host sync, so off by default on CUDA."""
        self.mutators = mutators or MutatorConfig()
        self.world = World(
            mesh=load_arena_mesh(meshes, self.device),
            mutators=self.mutators,
            params=TickParams.from_mutators(self.mutators, _float32(1.0 / _float32(self.tick_rate))),
        )
        self.state = GameState(
            ball=BallState.rest(num_envs, self.device),
            cars=CarState.empty(num_envs, 0, self.device),
            pads=BoostPadState.fresh(num_envs, self.device),
            tick_count=torch.zeros(num_envs, dtype=torch.int64, device=self.device),
        )
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

    def reset_kickoff(self, env_ids=None) -> None:
        """RocketSim's reset_kickoff for ball-only arenas: ball at rest at (0, 0, BALL_REST_Z), pads fresh."""
        rows = self._env_rows(env_ids)
        count = self.num_envs if rows is None else rows.numel()
        rest = BallState.rest(count, self.device)
        self.set_ball(pos=rest.pos, vel=rest.vel, ang_vel=rest.ang_vel, env_ids=env_ids)
        fresh = BoostPadState.fresh(count, self.device)
        pads = BoostPadState(
            is_active=_scatter(self.state.pads.is_active, rows, fresh.is_active),
            cooldown=_scatter(self.state.pads.cooldown, rows, fresh.cooldown),
        )
        self.state = dataclasses.replace(self.state, pads=pads)

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
        if self.mode == "fused":
            arena_kernels.launch_step_ticks_(self.state, events, self.world, ticks)
            return events
        if self.mode == "eager":
            self.state, events = step_ticks(self.state, events, self.world, ticks)
            return events
        runner = self._runners.get(ticks)
        if runner is None:
            runner = self._runners[ticks] = _Runner(self.world, ticks, self.mode, self.state, events)
        self.state, events = runner(self.state, events)
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

    def __init__(self, world: World, ticks: int, mode: str, state: GameState, events: ArenaEvents):
        self.loop = fast.Loop(
            lambda carry: fold_tick(carry[0], carry[1], world),
            (state, events),
            steps=ticks,
            mode="compile" if mode == "compile" else "graph",
        )

    def __call__(self, state: GameState, events: ArenaEvents):
        carry = self.loop.carry
        if self.loop.graph is None:
            self.loop.carry = (state, events)
        elif carry[0] is not state:  # the state was set from outside: load it into the static buffers
            tree.copy_(carry, (state, events))
        else:
            tree.copy_(carry[1], events)
        return self.loop()


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


def _float32(x: float) -> float:
    return float(np.float32(x))


__all__ = ["MODES", "NUM_CONTROLS", "Arena", "ArenaEvents", "World", "fold_tick", "step_ticks", "tick"]
