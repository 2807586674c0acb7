"""SkullKing-v0 through its public API: the multi-agent declaration, the nitro.make handle, checked-mode
errors, seat-relative observations, single-round episodes and their round weights, results and episode
statistics, and params validation."""

from __future__ import annotations

import pytest
import torch

import nitro
from nitro.core import agents, rng
from nitro.core.env import autoreset_step
from nitro.envs.skullking import cards
from nitro.envs.skullking.env import SkullKing
from nitro.envs.skullking.observation import SEAT_FEATURES, layout
from nitro.envs.skullking.params import SkullKingParams
from nitro.envs.skullking import state
from nitro.envs.skullking.state import OVER

CPU = torch.device("cpu")


def fresh(num_envs=4, seed=0, **params):
    env = SkullKing(SkullKingParams(**params))
    key = rng.env_keys(rng.key(seed), num_envs)
    return env, env.reset(key, num_envs, CPU), key


def random_actions(env, s, key):
    return env.bots()["random"](s, key)


def test_declaration_and_handle():
    """Four players are four agents, each its own team; the handle returns [N * 4] rows and [N] flags."""
    venv = nitro.make("skullking", num_envs=3, device="cpu", seed=1)
    assert venv.num_agents == 4 and venv.env.agent_team == (0, 1, 2, 3)
    obs, _ = venv.reset()
    assert obs.shape == (12, venv.single_observation_space.shape[0])
    assert venv.acting().all()  # bids are simultaneous: everyone acts in the first step
    obs, reward, terminated, truncated, _ = venv.step(venv.sample_actions())
    assert obs.shape[0] == 12 and reward.shape == (12,) and terminated.shape == (3,)
    # after the bids exactly one player acts per env
    assert venv.acting().view(3, 4).sum(1).tolist() == [1, 1, 1]


def test_checked_mode_errors():
    env, s, key = fresh(num_envs=2)
    good = random_actions(env, s, key)
    with pytest.raises(ValueError, match=r"shape \[8\].*got \[2, 4\]"):
        env.step(s, good.view(2, 4), key)
    with pytest.raises(TypeError, match="integer action ids"):
        env.step(s, good.float(), key)
    with pytest.raises(TypeError, match="torch.Tensor"):
        env.step(s, good.tolist(), key)
    bad = good.clone()
    bad[5] = cards.BID0 + 2  # two tricks in round 1 (one card dealt)
    with pytest.raises(ValueError, match=r"illegal action 77 \(bid 2\) for env 1 seat 1 in the bid phase; "
                                         r"legal: bid 0, bid 1"):
        env.step(s, bad, key)
    bad[5] = 3  # a card while bidding
    with pytest.raises(ValueError, match="illegal action 3"):
        env.step(s, bad, key)
    s, *_ = env.step(s, good, key)
    # in play, only the current player's row is checked: the others may hold anything
    acting = env.acting(s)
    action = random_actions(env, s, key)
    action[~acting] = 999
    env.step(s, action, key)
    action[acting] = cards.BID0  # a bid while playing
    with pytest.raises(ValueError, match="in the play phase"):
        env.step(s, action, key)


def test_unchecked_mode_skips_the_checks():
    env, s, key = fresh(num_envs=2, checked=False)
    env.step(s, torch.full((8,), cards.BID0 + 2), key)  # illegal, but not checked


def test_observations_are_seat_relative():
    """Each viewer sees its own hand first and the others by relative seat: rotating the viewers rotates
    the per-seat blocks, and the trick lists the card of the player r seats to the viewer's left at r."""
    env, s, key = fresh(num_envs=1, seed=3)
    s, *_ = env.step(s, random_actions(env, s, key), key)  # bids
    k2 = rng.fold_in(key, 1)
    s, obs, *_ = env.step(s, random_actions(env, s, k2), k2)  # the first card of the first trick
    lay = layout(env.params)
    n, f = 4, len(SEAT_FEATURES)
    hands = obs[:, lay["hand"]].bool()
    for seat in range(n):
        assert torch.equal(hands[seat], s.location[0] == seat)
    seats = obs[:, lay["seats"]].view(n, n, f)
    leader = int(s.order[0, 0])
    code = int(s.trick[0, 0])
    trick = obs[:, lay["trick"]].view(n, n, cards.NUM_CODES)
    for viewer in range(n):
        rel = (leader - viewer) % n
        assert trick[viewer, rel, code] == 1 and trick[viewer].sum() == 1
        for r in range(n):
            # the same seat's bid seen from every viewer at its relative position
            assert seats[viewer, r, SEAT_FEATURES.index("bid")] == s.bids[0, (viewer + r) % n] / 10
        assert seats[viewer, rel, SEAT_FEATURES.index("leads_trick")] == 1


def test_single_round_episodes_follow_the_round_weights():
    """episode='round' plays one round per episode, drawn by round_weights (here rounds 3 and 10 only,
    1:3), and ends after that round's last trick."""
    weights = (0, 0, 1, 0, 0, 0, 0, 0, 0, 3)
    env, s, key = fresh(num_envs=400, episode="round", round_weights=weights, checked=False)
    rounds = s.round.long()
    assert set(rounds.tolist()) == {2, 9}
    share = float((rounds == 9).float().mean())
    assert abs(share - 0.75) < 0.075  # 3 binomial standard errors at n=400: sqrt(.75 * .25 / 400) = .022
    env, s, key = fresh(num_envs=8, episode="round", round_weights=weights, checked=False)
    rounds = s.round.long()
    dealt = torch.where(rounds == 9, 10, 3)
    for t in range(41):  # round 10: 1 bid step + 40 cards
        k = rng.fold_in(key, t)
        s, obs, reward, terminated, _ = env.step(s, random_actions(env, s, k), k)
        expected_end = t == dealt * 4  # the bid step, then 4 players x d cards
        assert torch.equal(terminated, expected_end)
    assert (s.phase == OVER).all()


def test_results_and_episode_stats():
    """result() is each player's score; episode_stats() their share of rounds bid exactly (the counts
    themselves are checked against the reference in test_lockstep)."""
    env, s, key = fresh(num_envs=8, schedule=(2, 3), checked=False)
    for t in range(22):  # two rounds: 2 bid steps + 4 x (2 + 3) cards
        k = rng.fold_in(key, t)
        s, *_ = env.step(s, random_actions(env, s, k), k)
    assert (s.phase == OVER).all() and (s.rounds_played == 2).all()
    assert torch.equal(env.result(s), s.score.float().reshape(-1))
    stats = env.episode_stats(s)["bid_accuracy"].view(8, 4)
    assert torch.equal(stats, s.exact_bids.float() / 2)
    assert stats.max() <= 1 and stats.min() >= 0


@pytest.mark.parametrize("params, message", [
    ({"num_players": 9}, "num_players must be an int in 2..8"),
    ({"num_players": 2, "loot": True}, "loot=True needs 3 or more players"),
    ({"schedule": (0, 3)}, "tuple of hand sizes in 1..10"),
    ({"round_weights": (1,) * 10}, "apply to episode='round' only"),
    ({"episode": "round", "round_weights": (1, 2)}, "must be 10 non-negative numbers"),
    ({"start_round": 11}, r"start_round must be None or an int in 1\.\.10"),
    ({"tigress": "both"}, "tigress must be one of"),
])
def test_params_are_checked(params, message):
    with pytest.raises(ValueError, match=message):
        SkullKingParams(**params)


def test_every_bot_plays_legally_under_every_option():
    """The bots' actions pass checked mode in whole games with every advanced card, abilities and
    Rascal's cannons (every seat a different bot)."""
    env, s, key = fresh(num_envs=4, num_players=4, schedule=(3, 5), scoring="rascal_cannon",
                        **{"kraken": True, "white_whale": True, "loot": True, "pirate_abilities": True})
    bots = env.bots()
    assert set(bots) == {"random", "basic", "heuristic"}
    seat = agents.seats(4, 4)
    for t in range(80):
        k = rng.fold_in(key, t)
        chosen = [bots[b](s, k) for b in ("heuristic", "basic", "random", "heuristic")]
        action = torch.stack(chosen).gather(0, seat.view(1, -1)).squeeze(0)
        s, *_ = env.step(s, action, k)
    assert (s.phase == OVER).all()


@pytest.mark.parametrize("params", [
    {"episode": "round", "schedule": (1, 2, 3)},
    {"num_players": 2, "episode": "round", "schedule": (1, 2)},
    {"num_players": 3, "pirate_abilities": True, "scoring": "rascal_cannon", "schedule": (2, 3)},
    {"num_players": 8, "schedule": (1, 8)},
])
def test_max_decisions_bounds_every_window(params):
    """``max_decisions(W)`` (a dynamic program over an abstract game, game.max_decisions) is at least the
    most decisions any seat made in any W consecutive steps of random games with auto-reset, and a real
    saving over W (what the decision layout of the trainer sizes its slots by)."""
    env = SkullKing(SkullKingParams(**params, checked=False))
    n, num_envs, steps = env.num_agents, 64, 100
    s = env.reset(rng.env_keys(rng.key(5), num_envs), num_envs, CPU)
    key = rng.env_keys(rng.key(6), num_envs)
    acted = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: a second thread only adds synchronization (10x slower on 2 busy cores)
    try:
        for _ in range(steps):
            acted.append(env.acting(s).view(num_envs, n))
            k_act, k_env, key = rng.split(key, 3)
            s = autoreset_step(env, s, random_actions(env, s, k_act), k_env).state
    finally:
        torch.set_num_threads(threads)
    running = torch.cat([torch.zeros(1, num_envs, n, dtype=torch.int64), torch.stack(acted).long().cumsum(0)])
    for window in (4, 8, 32):
        most = int((running[window:] - running[:-window]).max())
        assert most <= env.max_decisions(window), (window, most)
        assert env.max_decisions(window) < window or window <= 4
        if window == 32:
            assert most >= env.max_decisions(window) // 2  # not vacuous: the games come near it


def test_equal_deck_words_deal_in_card_order(monkeypatch):
    """The deal sorts a random 30-bit word per card; two equal words (about once in 400k deals) go in card-id
    order, so eager, compiled and CUDA sorts deal the same hands. With every word equal the deck stays in
    card-id order: round 3 of four players gives cards 0-2 of the game to seat 0, 3-5 to seat 1, ..."""
    p = SkullKingParams()
    monkeypatch.setattr(state.rng, "bits", lambda key, shape: torch.zeros(shape, dtype=torch.int32))
    location = state.deal(p, rng.env_keys(rng.key(0), 2), torch.tensor([2, 2]))
    in_game = torch.nonzero(state.game_tables(p, CPU).in_deck).flatten()
    want = torch.full((74,), state.OUT, dtype=torch.int8)
    want[in_game] = state.DECK
    want[in_game[:12]] = torch.arange(4, dtype=torch.int8).repeat_interleave(3)
    assert torch.equal(location, want.expand(2, -1))
