"""The fast path: a compiled loop (Inductor's CPU backend) steps CartPole as eager PyTorch does."""

from __future__ import annotations

import pytest
import torch

import nitro
from nitro.core import fast, rng, tree
from nitro.core.env import autoreset_step

NUM_ENVS = 256
INJECTED_STEPS = 128
"""Steps compared one at a time from the same (eager) carry: every env finishes several random episodes."""
OPEN_LOOP_STEPS = 16
"""Steps run by one call of each loop with nothing injected."""
STEP_ATOL = 1e-6
"""Physics after one step from the same carry: Inductor's fused float32 arithmetic and vectorised sin/cos
may differ from eager's by an ulp or two of values <= ~4 (ulp 2.4e-7 in [2, 4)); measured max 2.4e-7."""
OPEN_LOOP_ATOL = 1e-5
"""Physics after OPEN_LOOP_STEPS unchecked steps: those ulp-level differences grow with the falling pole's
instability (measured 4e-7 after 16 steps, 1.3e-5 after 128), so 1e-5 leaves a >20x margin."""


def body_for(env):
    def body(carry):
        state, key, _, _, _ = carry
        k_act, k_env, k_next = rng.split(key, 3)
        action = env.action_space.sample(k_act, NUM_ENVS, env.action_mask(state))
        t = autoreset_step(env, state, action, k_env)
        return (t.state, k_next, t.reward, t.terminated, t.truncated)

    return body


def assert_same_carry(eager, compiled, atol: float) -> None:
    (e_state, e_key, e_rew, e_term, e_trunc), (c_state, c_key, c_rew, c_term, c_trunc) = eager, compiled
    assert torch.equal(e_key, c_key)
    assert torch.equal(e_state.elapsed, c_state.elapsed)
    for name in ("x", "x_dot", "theta", "theta_dot"):
        c, e = getattr(c_state, name), getattr(e_state, name)
        torch.testing.assert_close(c, e, rtol=0, atol=atol, msg=name)
    assert torch.equal(e_rew, c_rew) and torch.equal(e_term, c_term) and torch.equal(e_trunc, c_trunc)


def test_compiled_equals_eager_cartpole():
    env = nitro.make_env("CartPole-v1")
    key = rng.key(0)
    state = env.reset(key, NUM_ENVS, torch.device("cpu"))
    zeros = torch.zeros(NUM_ENVS)
    carry = (state, key, zeros, zeros.bool(), zeros.bool())
    eager = fast.Loop(body_for(env), tree.clone(carry), OPEN_LOOP_STEPS, mode="eager")
    compiled = fast.Loop(body_for(env), tree.clone(carry), OPEN_LOOP_STEPS, mode="compile")

    # one compiled step at a time from eager's carry (identical keys), so differences cannot pile up
    episodes = 0
    for _ in range(INJECTED_STEPS):
        before = eager.carry
        expected = eager.body(before)
        assert_same_carry(expected, compiled.body(tree.clone(before)), STEP_ATOL)
        eager.carry = expected
        episodes += int((expected[3] | expected[4]).sum())
    assert episodes > NUM_ENVS, "too few episodes ended to exercise the auto-reset"

    # then both loops run OPEN_LOOP_STEPS steps per call on their own, from the same carry
    compiled.carry = tree.clone(eager.carry)
    assert_same_carry(eager(), compiled(), OPEN_LOOP_ATOL)


def test_loop_mode_errors():
    with pytest.raises(ValueError, match="CUDA"):
        fast.Loop(lambda c: c, (torch.zeros(2),), 3, mode="graph")
    with pytest.raises(ValueError, match="mode must be one of"):
        fast.Loop(lambda c: c, (torch.zeros(2),), 3, mode="fast")


# ---- the handle's modes (nitro.make(mode=...)) ---------------------------------------------------------


def _dynamo_only(fn, **kwargs):
    """torch.compile's tracing (fullgraph, static shapes) with the eager backend: the handle's compiled
    functions must trace whole, and then compute exactly what eager PyTorch computes. (Inductor's code
    generation is what the loop tests above check, to rounding.)"""
    return torch.compile(fn, fullgraph=True, dynamic=False, backend="eager", **kwargs)


@pytest.mark.parametrize("env_id,params", [("CartPole-v1", {}), ("Pendulum-v1", {}),
                                           ("SkullKing-v0", {}),  # a masked multi-agent env, its checks traced
                                           ("SkullKing-v0", {"checked": False})])
def test_compiled_handle_steps_as_the_eager_one(env_id, params, monkeypatch):
    monkeypatch.setattr(fast, "compile", _dynamo_only)
    torch._dynamo.reset()
    eager = nitro.make(env_id, num_envs=16, device="cpu", seed=5, **params)
    compiled = nitro.make(env_id, num_envs=16, device="cpu", seed=5, mode="compile", **params)
    assert (eager.mode, compiled.mode) == ("eager", "compile")
    assert torch.equal(eager.reset()[0], compiled.reset()[0])
    for i in range(40):
        actions = eager.sample_actions()
        assert torch.equal(actions, compiled.sample_actions())
        e, c = eager.step(actions), compiled.step(actions)
        for a, b in zip(e[:4], c[:4]):
            assert torch.equal(a, b), i
        assert torch.equal(e[4]["final_obs"], c[4]["final_obs"])
        if i == 20:  # a reset mid-way, with a new seed
            assert torch.equal(eager.reset(seed=9)[0], compiled.reset(seed=9)[0])
    bad = torch.full_like(actions, 10**6) if not actions.dtype.is_floating_point else actions * float("nan")
    with pytest.raises(ValueError, match="actions"):
        compiled.step(bad)  # actions are checked as in eager mode


def test_inductor_compiled_skull_king_steps_as_the_eager_one():
    """Inductor's C++ code for the Skull King step (gathers, masks, concatenated bool planes, a checked
    mode's device assert): vectorized, it corrupted the heap on its first call (fast.CPU_OPTIONS); now every
    result equals eager stepping's over 12 steps (integer and boolean state: no rounding to allow)."""
    torch._dynamo.reset()
    eager = nitro.make("SkullKing-v0", num_envs=16, device="cpu", seed=3)
    compiled = nitro.make("SkullKing-v0", num_envs=16, device="cpu", seed=3, mode="compile")
    assert torch.equal(eager.reset()[0], compiled.reset()[0])
    for i in range(12):
        actions = eager.sample_actions()
        assert torch.equal(actions, compiled.sample_actions())
        e, c = eager.step(actions), compiled.step(actions)
        for a, b in zip((*e[:4], e[4]["final_obs"]), (*c[:4], c[4]["final_obs"])):
            assert torch.equal(a, b), i


def test_handle_modes_resolve_per_device():
    assert nitro.make("CartPole-v1", device="cpu", mode="auto").mode == "eager"
    with pytest.raises(ValueError, match="mode='graph' needs a CUDA device"):
        nitro.make("CartPole-v1", device="cpu", mode="graph")
    with pytest.raises(ValueError, match="mode must be one of eager, compile, graph, auto"):
        nitro.make("CartPole-v1", device="cpu", mode="fast")


def test_handle_results_are_shared_until_held(monkeypatch):
    """The README's loop (keeping only the latest results) alternates between the two shared result sets
    and copies nothing; results a caller keeps, whole or as a view, are never overwritten: the steps
    after them write the other set or the private one, whose results come out as clones."""
    monkeypatch.setattr(fast, "compile", _dynamo_only)
    torch._dynamo.reset()
    eager = nitro.make("CartPole-v1", num_envs=16, device="cpu", seed=5)
    env = nitro.make("CartPole-v1", num_envs=16, device="cpu", seed=5, mode="compile")
    eager.reset(), env.reset()
    addresses = set()
    for _ in range(6):
        actions = eager.sample_actions()
        sampled = env.sample_actions()
        assert torch.equal(sampled, actions)
        obs, reward, terminated, truncated, info = env.step(sampled)
        assert torch.equal(obs, eager.step(actions)[0])
        addresses.add(obs.data_ptr())
    assert len(addresses) == 2 and env._fast.private is None  # the two shared sets, in turn
    kept = []
    for i in range(8):
        actions = eager.sample_actions()
        env.sample_actions()
        e, g = eager.step(actions), env.step(actions)
        assert all(torch.equal(a, b) for a, b in zip(e[:4], g[:4]))
        kept.append((g[0] if i % 2 else g[0][3:], g[4]["final_obs"][:, 1], e[0] if i % 2 else e[0][3:],
                     e[4]["final_obs"][:, 1]))  # whole results and views of them
    assert env._fast.private is not None
    for got, final, want, want_final in kept:
        assert torch.equal(got, want) and torch.equal(final, want_final)
