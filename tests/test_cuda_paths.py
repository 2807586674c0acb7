"""CUDA-only checks of the fast path: compiled and graphed stepping equal eager stepping, and a
training iteration runs without a single host sync."""

import pytest
import torch

import nitro
from nitro import bench
from nitro.core import fast, rng, tree

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

STEPS = 8
# Inductor may contract float32 arithmetic into FMAs, so compiled and eager agree to rounding, not bit
# for bit. CartPole's upright pole is unstable (errors grow ~e^(4.4 t)); over 8 steps (0.16 s) a few-ulp
# difference stays below 1e-5 absolute on its O(0.1) state.
ATOL = 1e-5


@pytest.mark.parametrize("mode", ["compile", "graph"])
def test_cartpole_fast_path_matches_eager(mode):
    env = nitro.make_env("CartPole-v1")
    n = 65536
    key = rng.env_keys(rng.key(3, "cuda"), n)
    state = env.reset(key, n, torch.device("cuda"))
    body = bench._body(env, n)
    probe = body((state, key))
    carry = (state, key, *probe[2:])
    eager = fast.Loop(body, tree.clone(carry), STEPS, "eager")()
    fast_out = fast.Loop(body, tree.clone(carry), STEPS, mode)()
    for a, b in zip(tree.leaves(eager), tree.leaves(fast_out)):
        if a.dtype.is_floating_point:
            torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        else:
            # flags and counters may only differ where a float lies within rounding of a threshold
            assert (a != b).float().mean() < 1e-4


def test_training_iteration_never_syncs():
    from nitro.train.config import load
    from nitro.train.ppo import Trainer

    cfg = load("cartpole", ["env.num_envs=4096", "run.compile=false", "run.graph=false",
                            "run.console=false", "run.tensorboard=false"])
    _second_call_never_syncs(Trainer(cfg).iteration)


def _second_call_never_syncs(fn) -> None:
    fn()  # the first call allocates; the checked one must not sync
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_env_handle_step_never_syncs():
    env = nitro.make("CartPole-v1", num_envs=1024, device="cuda")  # action checks included
    env.reset()
    actions = env.sample_actions()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            env.step(actions)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_graphed_training_matches_eager():
    """Replaying the captured iteration advances the same state as running it eagerly: episodes go
    on across replays and parameters follow the same trajectory."""
    from nitro.train.config import load
    from nitro.train.ppo import Trainer

    trainers = []
    for graph in ("true", "false"):
        cfg = load("cartpole", ["env.num_envs=2048", "run.compile=false", f"run.graph={graph}",
                                "run.console=false", "run.tensorboard=false"])
        t = Trainer(cfg)
        if t.graphed:
            t._capture()
        for _ in range(3):
            t.graph.replay() if t.graphed else t.iteration()
        trainers.append(t)
    g, e = trainers
    torch.cuda.synchronize()
    # same kernels in the same order: equal up to atomics in cuBLAS/reductions (none expected)
    torch.testing.assert_close(g.opt.flat, e.opt.flat, rtol=0, atol=1e-6)
    torch.testing.assert_close(g.carry.obs, e.carry.obs, rtol=0, atol=1e-6)
    assert torch.equal(g.ep_stats, e.ep_stats)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "SkullKing-v0"])
def test_graphed_handle_steps_as_the_eager_one(env_id):
    """nitro.make(mode="auto") on CUDA replays a CUDA graph per call: the same episodes as eager stepping
    (to Inductor's rounding), results that later steps never overwrite, sampled actions stepped without
    a copy, a policy's own actions copied in and checked, and resets in between."""
    n = 4096
    eager = nitro.make(env_id, num_envs=n, device="cuda", seed=5)
    graphed = nitro.make(env_id, num_envs=n, device="cuda", seed=5, mode="auto")
    assert graphed.mode == "graph"
    torch.testing.assert_close(eager.reset()[0], graphed.reset()[0], rtol=0, atol=0)
    held = []
    for i in range(STEPS):
        if i % 2:  # a policy's actions (a tensor of its own), else the env's samples
            actions = eager.sample_actions()
            torch.testing.assert_close(actions, graphed.sample_actions(), atol=1e-6, rtol=0)  # Box: rounding
            e, g = eager.step(actions), graphed.step(actions.clone())
        else:
            e, g = eager.step(eager.sample_actions()), graphed.step(graphed.sample_actions())
        held.append((tuple(x.clone() for x in g[:4]), g))
        for a, b in zip((*e[:4], e[4]["final_obs"]), (*g[:4], g[4]["final_obs"])):
            if a.dtype.is_floating_point:
                torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
            else:
                assert (a != b).float().mean() < 1e-4  # flags may differ only where a float is at a threshold
        if i == STEPS // 2:
            torch.testing.assert_close(eager.reset(seed=9)[0], graphed.reset(seed=9)[0], rtol=0, atol=0)
    for copies, results in held:  # what a step returned stays as it was
        assert all(torch.equal(a, b) for a, b in zip(copies, results[:4]))


def test_graphed_handle_checks_actions_and_replays_one_graph():
    env = nitro.make("CartPole-v1", num_envs=1024, device="cuda", mode="graph")
    env.reset()
    with pytest.raises(ValueError, match="Discrete actions must have shape"):
        env.step(torch.zeros(3, dtype=torch.int64, device="cuda"))
    env.step(env.sample_actions())
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            env.step(env.sample_actions())
    finally:
        torch.cuda.set_sync_debug_mode("default")


def _league_trainer(graph: str, num_envs: int = 2048):
    from nitro.train.config import load
    from nitro.train.ppo import Trainer

    cfg = load("ConnectFour-v3", [f"env.num_envs={num_envs}", "run.compile=false", f"run.graph={graph}",
                                  "run.console=false", "run.tensorboard=false", "league.pool_size=4",
                                  "league.bots=[random,tactical]", "league.mix={self: 0.3, pool: 0.5, tactical: 0.2}"])
    return Trainer(cfg)


def test_league_iteration_never_syncs():
    """Multi-agent PPO with opponents in the batch (stacked snapshots, bots, self): no host sync."""
    _second_call_never_syncs(_league_trainer("false", 1024).iteration)


def test_graphed_league_training_matches_eager():
    trainers = []
    for graph in ("true", "false"):
        t = _league_trainer(graph)
        if t.graphed:
            t._capture()
        for _ in range(3):
            t.graph.replay() if t.graphed else t.iteration()
        trainers.append(t)
    g, e = trainers
    torch.cuda.synchronize()
    torch.testing.assert_close(g.opt.flat, e.opt.flat, rtol=0, atol=1e-6)  # as the CartPole test above
    assert torch.equal(g.outcomes, e.outcomes) and torch.equal(g.carry.opponent, e.carry.opponent)
