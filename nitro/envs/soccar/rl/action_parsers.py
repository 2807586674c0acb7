"""Action parsers: a policy's actions, one row per car [N * C, ...], to car controls [N, C, 8].

- `LookupTableAction`: RLGym's 90-action table (rlgym `LookupTableAction`, GigaLearn `DefaultAction`:
  the same actions in the same order), with GigaLearn's action masks as an option.
- `ContinuousAction`: the 8 controls directly (rlgym-sim's `ContinuousAction`).

Controls are float32 in the order throttle, steer, pitch, yaw, roll, jump, boost, handbrake. The env
holds each step's controls for its ``tick_skip`` ticks (RLGym's ``RepeatAction(parser, repeats)``).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import torch

from nitro.core.spaces import Box, Discrete
from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState, has_flip_or_jump

SIGNS, BUTTON = (-1, 0, 1), (0, 1)


@functools.lru_cache(maxsize=1)
def lookup_table() -> tuple[tuple[float, ...], ...]:
    """The 90 actions: 24 ground actions (throttle, steer, boost, handbrake; boosting only at full
    throttle), then 66 aerial ones (pitch, yaw, roll, jump, boost; no jump with yaw, since roll does
    side flips; none that repeats a ground action), each as 8 controls."""
    ground = [
        (throttle, steer, 0, steer, 0, 0, boost, handbrake)
        for throttle, steer, boost, handbrake in itertools.product(SIGNS, SIGNS, BUTTON, BUTTON)
        if not (boost and throttle != 1)
    ]
    aerial = [
        (boost, yaw, pitch, yaw, roll, jump, boost, int(bool(jump and (pitch or yaw or roll))))  # handbrake: wavedashes
        for pitch, yaw, roll, jump, boost in itertools.product(SIGNS, SIGNS, SIGNS, BUTTON, BUTTON)
        if not (jump and yaw) and (pitch or roll or jump)
    ]
    return tuple(tuple(float(x) for x in a) for a in ground + aerial)


NUM_GROUND_ACTIONS = 24
ENCODE_BITS = 12
"""`LookupTableAction.encode` rounds controls to multiples of 2^-ENCODE_BITS before the nearest action."""


@functools.lru_cache(maxsize=4)
def gigalearn_masks(air_mask_quirk: bool) -> dict[str, tuple[bool, ...]]:
    """GigaLearn's DefaultAction masks over the 90 actions: ground (the ground actions), air (the
    aerial actions without jump, plus the ground actions that steer with yaw alone: throttle equal
    to boost and handbrake exactly when turning), jump, boost. GigaLearn's air mask starts one past
    the first aerial action (``i > numGroundActions``): ``air_mask_quirk`` keeps that."""
    first_air = NUM_GROUND_ACTIONS + 1 if air_mask_quirk else NUM_GROUND_ACTIONS
    ground, air, jump, boost = [], [], [], []
    for i, a in enumerate(lookup_table()):
        on_ground = i < NUM_GROUND_ACTIONS
        ground.append(on_ground)
        yaw_only = on_ground and a[V.THROTTLE] == a[V.BOOST] and (a[V.YAW] != 0) == bool(a[V.HANDBRAKE])
        air.append((i >= first_air and not a[V.JUMP]) or yaw_only)
        jump.append(bool(a[V.JUMP]))
        boost.append(bool(a[V.BOOST]))
    return {"ground": tuple(ground), "air": tuple(air), "jump": tuple(jump), "boost": tuple(boost)}


@dataclasses.dataclass(frozen=True)
class LookupTableAction:
    """One of 90 actions per car (ids into `lookup_table`), RLGym's and GigaLearn's table."""

    masks: bool = False
    """GigaLearn's action masks (`DefaultAction::GetActionMask`): ground actions on the ground, air
    actions in the air, no boost actions without boost, jump actions while the car has a flip or jump
    (or lies on its roof)."""
    air_mask_quirk: bool = True
    """With ``masks``: leave out the first aerial action as GigaLearn's off-by-one does (its checkpoints
    never chose it in the air). False includes it."""

    @property
    def action_space(self) -> Discrete:
        return Discrete(len(lookup_table()))

    def __call__(self, action: torch.Tensor, state: SoccarState) -> torch.Tensor:
        table = V.device_tensor(lookup_table(), action.device)
        return table[action.long()].view(state.num_envs, state.num_cars, V.NUM_ACTIONS)

    def encode(self, controls: torch.Tensor, state: SoccarState) -> torch.Tensor:
        """The action ids [N * C] nearest to ``controls`` [N, C, 8] (squared distance over the 8 controls,
        among the actions the mask allows; ties go to the lower id): how a scripted player's controls
        become actions of this parser.

        Ties are common (a saturated throttle of 1 lies as far from a row with 0 as from one with boost),
        so the same controls must give the same distances on every device: the controls are rounded to
        multiples of 2^-12 first (a CPU's and a GPU's, which differ by ulps, then agree), and the
        squares are summed in one order (a reduction's order differs between devices)."""
        table = V.device_tensor(lookup_table(), controls.device)
        grid = float(1 << ENCODE_BITS)
        rounded = torch.round(controls.reshape(-1, 1, V.NUM_ACTIONS) * grid) / grid
        square = (rounded - table).square()  # [N * C, 90, 8]
        distance = square[..., 0]
        for k in range(1, V.NUM_ACTIONS):
            distance = distance + square[..., k]
        mask = self.action_mask(state)
        if mask is not None:
            distance = distance.masked_fill(~mask, torch.inf)
        return distance.argmin(-1)

    def action_mask(self, state: SoccarState) -> torch.Tensor | None:
        """[N * C, 90] bool, or None without ``masks``."""
        if not self.masks:
            return None
        cars, device = state.game.cars, state.prev_action.device
        m = {k: V.device_tensor(v, device, torch.bool) for k, v in gigalearn_masks(self.air_mask_quirk).items()}
        on_ground = cars.is_on_ground.unsqueeze(-1)
        mask = torch.where(on_ground, m["ground"], m["air"])
        mask = mask & ~((cars.boost == 0).unsqueeze(-1) & m["boost"])
        turtled = cars.has_world_contact & (cars.world_contact_normal[..., 2] > 0.9)
        mask = mask | ((has_flip_or_jump(cars) | turtled).unsqueeze(-1) & m["jump"])
        return mask.view(-1, mask.shape[-1])


@dataclasses.dataclass(frozen=True)
class ContinuousAction:
    """The 8 controls per car, as rlgym-sim's ContinuousAction reads them: throttle, steer, pitch, yaw,
    roll clipped to [-1, 1]; jump, boost, handbrake pressed when > 0."""

    @property
    def action_space(self) -> Box:
        return Box.of(-1.0, 1.0, (V.NUM_ACTIONS,))

    def __call__(self, action: torch.Tensor, state: SoccarState) -> torch.Tensor:
        a = action.float().view(state.num_envs, state.num_cars, V.NUM_ACTIONS)
        return torch.cat((a[..., : V.JUMP].clamp(-1.0, 1.0), (a[..., V.JUMP :] > 0).float()), -1)

    def encode(self, controls: torch.Tensor, state: SoccarState) -> torch.Tensor:
        """``controls`` [N, C, 8] as actions [N * C, 8] (they parse back to themselves)."""
        return controls.reshape(-1, V.NUM_ACTIONS)

    def action_mask(self, state: SoccarState) -> None:
        return None


ActionParser = LookupTableAction | ContinuousAction
