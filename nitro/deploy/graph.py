"""The bot's policy graph: the state the packet adapter fills -> the run's observation builder -> its
action mask -> the trained policy's deterministic action -> its action parser, exported as one ONNX
model. The graph is traced from the training code itself (`Soccar.observe`, `Soccar.action_mask`,
the policy, the parser), so the bot computes what the env computed in training.

Inputs are `runtime.STATE_FIELDS` (one env, [1, ...]), ``prev_action`` [1, C, 8] and, for recurrent
policies, ``hidden.h`` / ``hidden.c`` [C, H]; outputs are ``obs`` [C, D], ``action``, ``controls``
[C, 8], ``value`` [C] and ``hidden.h_next`` / ``hidden.c_next``: one row per car slot (the bot reads
its own).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from nitro.deploy import runtime
from nitro.envs.soccar import ArenaEvents, BallState, BoostPadState, CarState, GameState
from nitro.envs.soccar.rl import Soccar, SoccarState
from nitro.envs.soccar.rl.obs_builders import DefaultObs

OPSET = 17


def car_slots(env: Soccar) -> tuple[int, int]:
    """(blue, orange) car slots of the bot's state: the run's team sizes, or, for RLGym's padded
    DefaultObs (whose observation has the same size for any team size up to its padding), the
    padding, so one export plays every team size the observation fits."""
    obs = env.params.obs
    if isinstance(obs, DefaultObs) and obs.zero_padding is not None:
        return obs.zero_padding, obs.zero_padding
    return env.params.blue, env.params.orange


def input_names(recurrent: bool) -> list[str]:
    return [*runtime.STATE_FIELDS, "prev_action", *(("hidden.h", "hidden.c") if recurrent else ())]


class PolicyGraph(nn.Module):
    """``forward(*inputs)`` in the order of `input_names` -> (obs, action, controls, value, *hidden)."""

    def __init__(self, env: Soccar, policy, obs_rms, blue: int, orange: int):
        super().__init__()
        self.env, self.policy, self.obs_rms = env, policy, obs_rms
        self.blue, self.orange = blue, orange
        self.names = input_names(policy.recurrent)

    def state(self, x: dict[str, torch.Tensor]) -> SoccarState:
        """The inputs as a batch of one env: the adapter's fields, a fresh car's values elsewhere."""
        c, device = self.blue + self.orange, x["active"].device
        cars = CarState.fresh(1, c, device)
        cars = dataclasses.replace(cars, **{n: x[f"cars.{n}"] for n in runtime.CAR_FIELDS})
        ball = dataclasses.replace(BallState.rest(1, device), pos=x["ball.pos"], vel=x["ball.vel"],
                                   ang_vel=x["ball.ang_vel"])
        pads = dataclasses.replace(BoostPadState.fresh(1, device), is_active=x["pads.is_active"],
                                   cooldown=x["pads.cooldown"])
        game = GameState(ball=ball, cars=cars, pads=pads, tick_count=torch.zeros(1, dtype=torch.int64, device=device),
                         **GameState.scoreboard(1, device))
        return SoccarState(game=game, events=ArenaEvents.none(1, c, device), prev_action=x["prev_action"],
                           ticks_since_touch=torch.zeros(1, dtype=torch.int64, device=device),
                           touches=torch.zeros(1, c, dtype=torch.int32, device=device), active=x["active"],
                           blue=self.blue, orange=self.orange)

    def forward(self, *inputs: torch.Tensor):
        x = dict(zip(self.names, inputs))
        state = self.state(x)
        obs = self.env.observe(state)
        hidden = (x["hidden.h"], x["hidden.c"]) if self.policy.recurrent else ()
        out, value, hidden = self.policy(self.obs_rms.normalize(obs) if self.obs_rms else obs, hidden)
        mask = self.env.action_mask(state)
        if mask is not None:
            out = self.policy.dist.mask_logits(out, mask)
        action = self.policy.dist.to_env(self.policy.dist.mode(out))
        controls = self.env.params.action(action, state) * state.active.unsqueeze(-1)  # as Soccar.step parses
        return (obs, action, controls[0], value, *hidden)


def example_inputs(graph: PolicyGraph) -> dict[str, torch.Tensor]:
    """Zeros of every input's shape and dtype (identity rotations, every slot active)."""
    c = graph.blue + graph.orange
    x = {}
    for name, (shape, dtype) in runtime.STATE_FIELDS.items():
        x[name] = torch.zeros(1, *[c if d == -1 else d for d in shape], dtype=_torch_dtype(dtype))
    x["cars.rot_mat"][:] = torch.eye(3)
    x["active"][:] = True
    x["prev_action"] = torch.zeros(1, c, 8)
    if graph.policy.recurrent:
        x["hidden.h"], x["hidden.c"] = graph.policy.initial_hidden(c, "cpu")
    return x


def _torch_dtype(dtype) -> torch.dtype:
    return {np.float32: torch.float32, np.bool_: torch.bool}[dtype]


def output_names(recurrent: bool) -> list[str]:
    return ["obs", "action", "controls", "value", *(("hidden.h_next", "hidden.c_next") if recurrent else ())]


@contextlib.contextmanager
def _onnx_symbolics():
    """Two exports the ONNX converter or onnxruntime lack, for the duration of an export:

    - ``torch.argsort(..., stable=True)`` (the observation builders order car slots with it) as TopK,
      which orders equal keys by index (the ONNX spec's tie-break), i.e. stably;
    - ``torch.where`` over bool values (GigaLearn's action mask) through uint8, since onnxruntime's CPU
      Where has no bool kernel.
    """
    from torch.onnx import symbolic_helper

    @symbolic_helper.parse_args("v", "i", "i", "i")
    def argsort(g, x, stable, dim, descending):
        size = g.op("Gather", g.op("Shape", x), g.op("Constant", value_t=torch.tensor([dim])))
        return g.op("TopK", x, size, axis_i=dim, largest_i=descending, sorted_i=1, outputs=2)[1]

    def where(g, condition, x, y, _outputs=None):
        def is_bool(v):
            return v.type().scalarType() == "Bool"

        if not is_bool(condition):
            condition = g.op("Cast", condition, to_i=ONNX_BOOL)
        if not (is_bool(x) and is_bool(y)):
            return g.op("Where", condition, x, y)
        as_uint8 = [g.op("Cast", v, to_i=ONNX_UINT8) for v in (x, y)]
        return g.op("Cast", g.op("Where", condition, *as_uint8), to_i=ONNX_BOOL)

    symbolics = {"aten::argsort": argsort, "aten::where": where}
    for name, fn in symbolics.items():
        torch.onnx.register_custom_op_symbolic(name, fn, OPSET)
    try:
        yield
    finally:
        for name in symbolics:
            torch.onnx.unregister_custom_op_symbolic(name, OPSET)


ONNX_UINT8, ONNX_BOOL = 2, 9
"""onnx.TensorProto's element types."""


def export_graph(graph: PolicyGraph, path: str | Path) -> Path:
    """Write the graph as ONNX to ``path`` with the TorchScript-based exporter (the one custom
    symbolics extend; its deprecation notice is silenced, as are the tracer's notes that tensors made
    during the trace become constants: the builders' tables and slot maps are constants)."""
    x = example_inputs(graph)
    names = graph.names
    with _onnx_symbolics(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", "You are using the legacy TorchScript", DeprecationWarning)
        warnings.filterwarnings("ignore", "The feature will be removed", DeprecationWarning)
        torch.onnx.export(graph.eval(), tuple(x[n] for n in names), str(path), input_names=names,
                          output_names=output_names(graph.policy.recurrent), opset_version=OPSET, dynamo=False)
    return Path(path)
