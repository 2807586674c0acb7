"""CUDA-only checks of the watching machinery: the phase timer and the replay recorder inside CUDA
graphs, and no host syncs from either."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import BallState, BoostPadState, CarState, GameState
from nitro.monitor.recorder import Recorder
from nitro.monitor.stream import PhaseTimer
from nitro.train.config import load
from nitro.train.ppo import Trainer

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)


def test_phase_split_of_a_graphed_iteration():
    cfg = load("cartpole", ["env.num_envs=4096", "run.compile=false", "run.graph=true", "run.console=false",
                            "run.tensorboard=false"])
    trainer = Trainer(cfg)
    trainer._capture()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    trainer.graph.replay()
    start.record()
    trainer.graph.replay()
    end.record()
    end.synchronize()
    phases = trainer.phases.read()
    total = start.elapsed_time(end) / 1e3
    # the split is re-timed by every replay (event nodes in the graph) and lies inside the replay
    assert 0 < phases["collect"] and 0 < phases["learn"]
    assert phases["collect"] + phases["learn"] <= total


def test_recorder_captured_in_a_graph_reads_the_live_state():
    device = torch.device("cuda")
    n = 64
    state = GameState(ball=BallState.rest(n, device), cars=CarState.empty(n, 2, device),
                      pads=BoostPadState.fresh(n, device), tick_count=torch.zeros(n, dtype=torch.int64, device=device),
                      **GameState.scoreboard(n, device))
    rec = Recorder(state, env_ids=[3, 60], frames=1, teams=[0, 1])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        rec.capture(0, state)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        rec.capture(0, state)
    state.ball.pos.copy_(torch.arange(n * 3, dtype=torch.float32, device=device).view(n, 3))
    state.cars.boost.fill_(42.0)
    state.tick_count.fill_(7)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        graph.replay()
        got = []
        assert rec.flush(1, got.append)  # queues an asynchronous copy: no sync on this thread
    finally:
        torch.cuda.set_sync_debug_mode("default")
    rec.close()
    np.testing.assert_array_equal(got[0].ball_pos[:, 0], state.ball.pos[[3, 60]].cpu().numpy())
    assert (got[0].car_boost == 42.0).all() and (got[0].tick == 7).all()
