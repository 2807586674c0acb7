"""PPO end to end on the accelerator: collect, advantages, update, log.

One iteration is pure device work with no host syncs: a T-step rollout (policy inference, env step,
storage), GAE, and epochs x minibatches of clipped-surrogate updates. On CUDA the whole iteration is
captured in one CUDA graph and replayed; long runs also compile the rollout step and the loss. The host
only wakes up to log (every ``run.log_every`` updates) and to checkpoint; both first check, on numbers the
device kept at every update, that nothing became NaN/Inf, so no checkpoint is written after a bad update.

A run saves a checkpoint every ``run.checkpoint_every`` updates, every ``run.checkpoint_seconds``, at
the end, and on Ctrl-C / SIGTERM; it holds its run directory's lock while it trains (``rundir``), and a
resume continues bit for bit where the checkpoint was taken (at the same thread count and device).

Truncated episodes are bootstrapped from their final observation: the step's reward gets
``gamma * V(final_obs)`` and the GAE chain is cut there, as for terminations (envs that never truncate,
``Env.truncates = False``, skip that value pass).

Multi-agent envs (docs/API.md): the learner drives every agent row (pure self-play) or, with a league
(``league.pool_size`` or ``league.bots``), one team per env while opponents drive the other rows in the
same batch: its own current policy, K stacked past snapshots and scripted bots
(``nitro.train.opponents``). Who sits where is a per-env tensor re-drawn when an episode ends. The
rollout stores the learner's rows only: its "env columns" are learner slots (env e, seat j of its team).
Turn-based envs' rows that do not act stay in the rollout for the critic (their rewards reach the
last acting step through GAE) and are masked out of the policy loss; or, with ``ppo.decisions``, the
rollout keeps only the steps where a seat decides, packed per seat (``nitro.train.decisions``: rewards
summed onto the seat's last decision, GAE over its decisions), and the update runs over those. The
league's host side (ratings, snapshots, matchmaking: ``nitro.train.league``) and the curriculum
(``nitro.train.curriculum``) run between updates.
"""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from nitro.core import agents, fast, rng, tree
from nitro.core.env import autoreset_step
from nitro.core.errors import NitroError
from nitro.core.registry import make_env
from nitro.core.spaces import Box
from nitro.monitor.stream import PhaseTimer, RunStatus, device_stats
from nitro.train import checkpoint, curriculum, decisions, dist, league, memory, rundir, target
from nitro.train.config import ConfigError, TrainConfig, resolve_device, to_dict, validate
from nitro.train.opponents import Opponents, PolicyStack, Seating
from nitro.train.optim import FlatAdam, RunningMeanStd
from nitro.train.policy import ActorCritic
from nitro.train.stop import StopSignals, TrainingInterrupted
from nitro.train.target import RecentEpisodes


COMPILE_MIN_UPDATES = 1000
"""run.compile=auto compiles on CUDA for runs planned this long: compiling costs seconds (the first time
tens of seconds; the compile cache keeps it across runs), a CUDA graph alone already removes the launch
overhead, and compiling fuses kernels for a part of each update more."""


CPU_ENVS_PER_THREAD = 4096
"""run.threads=0 on a CPU: one intra-op thread per this many envs. 20 updates of the CartPole preset (256
envs) took 5 CPU-seconds on one thread and 58 on two, on a shared 2-core machine: on small tensors a
second thread only adds synchronization (and spins while other processes hold the cores)."""


def auto_threads(num_envs: int, device: torch.device) -> int:
    """run.threads=0: PyTorch's default on a GPU; on a CPU one thread per CPU_ENVS_PER_THREAD envs,
    between 1 and PyTorch's default."""
    default = torch.get_num_threads()
    if device.type != "cpu":
        return default
    return max(1, min(default, num_envs // CPU_ENVS_PER_THREAD))


class TrainingDiverged(NitroError, RuntimeError):
    """Loss, gradients or parameters became NaN/Inf."""


@dataclass
class Carry:
    """What a rollout step hands to the next. Per env: [N]; per agent row: [R] = [N * A]; per learner
    slot: [L] (= N for single-agent envs)."""

    env_state: Any
    obs: torch.Tensor
    """[R, D] raw observation of env_state, every agent row."""
    first: torch.Tensor
    """[L] bool: the slot's observation begins an episode (the LSTM state is zeroed there)."""
    hidden: tuple
    """LSTM (h, c) of each learner slot before obs, or ()."""
    key: torch.Tensor
    """[N] per-env random keys of the next step."""
    ep_return: torch.Tensor
    """[R] env reward summed over the episode so far, every agent row."""
    ep_length: torch.Tensor
    """[N] steps of the episode so far."""
    disc_return: torch.Tensor
    """[L] discounted return so far, whose variance scales rewards."""
    learner_team: torch.Tensor
    """[N] int64 the team the learner drives in each env (0 when it drives every row)."""
    opponent: torch.Tensor
    """[N] int64 who drives the other rows: an opponent id (0 self, 1..K pool slots, then bots)."""
    pending: Any = ()
    """ppo.decisions: each learner slot's decision carried into the next rollout (``decisions.Pending``)."""


@dataclass
class Buffers:
    """Rollout storage, [T, L, ...] on the device; with ppo.decisions [K + 1, L, ...]: decision slots
    (``nitro.train.decisions``) and a discard row."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    firsts: torch.Tensor
    masks: torch.Tensor | None
    hidden: tuple
    """LSTM state at the start of each BPTT chunk, [T / bptt, N, H] each."""
    acting: torch.Tensor | None
    """Turn-based envs: the slot acted at the step (else None: always)."""
    advantages: torch.Tensor
    returns: torch.Tensor
    count: torch.Tensor | None = None
    """ppo.decisions: [L] int64 the slots each learner slot filled this rollout."""
    trained: torch.Tensor | None = None
    """ppo.decisions: [K, L] bool the slots the update learns from (their advantage is known)."""


class Trainer:
    def __init__(self, cfg: TrainConfig, run_dir: str | Path | None = None, resume: str | Path | None = None):
        validate(cfg)
        resolve_device(cfg.run.device)  # a missing GPU is a one-line error, before anything starts
        self.cfg = cfg
        self.dist, self.device = dist.init(cfg.run.device)
        p, d = cfg.ppo, self.device
        if not cfg.run.threads:  # recorded in config.yaml: a resume uses the same count again
            cfg.run.threads = auto_threads(cfg.env.num_envs, d)
        torch.set_num_threads(cfg.run.threads)
        self.curriculum = curriculum.Curriculum(curriculum.parse(cfg.curriculum.stages)) \
            if cfg.curriculum.stages else None
        stage_env, _, stage_mix = self.curriculum.settings() if self.curriculum else ({}, {}, None)
        self.env_params = {**cfg.env.params, **stage_env}
        """The env's params in force (the config's, with the curriculum stage's on top)."""
        self.env = make_env(cfg.env.id, **self.env_params)
        if not isinstance(self.env.observation_space, Box) or len(self.env.observation_space.shape) != 1:
            raise ValueError(f"PPO needs flat Box observations; {cfg.env.id} has {self.env.observation_space}")
        self.N, self.T = cfg.env.num_envs, p.num_steps
        self.obs_dim = self.env.observation_space.shape[0]
        self.seed = cfg.run.seed + 1000 * self.dist.rank
        self.num_updates = p.total_steps // (self.N * self.T * self.dist.world_size)
        if self.num_updates < 1:
            raise ConfigError(f"ppo.total_steps={p.total_steps} is less than one update of {self.dist.world_size} "
                              f"processes ({self.N * self.T * self.dist.world_size} env steps); raise it")
        memory.check(cfg, self.env, d)
        self.compiled = cfg.run.compile == "true" or (
            cfg.run.compile == "auto" and d.type == "cuda" and self.num_updates >= COMPILE_MIN_UPDATES
            and self.env.capturable)
        self.graphed = cfg.run.graph == "true" or (
            cfg.run.graph == "auto" and d.type == "cuda" and self.env.capturable)
        if self.graphed and d.type != "cuda":
            raise ConfigError(f"run.graph=true needs a CUDA device, this run is on {d}; use run.graph=auto")
        self.bf16 = cfg.run.precision == "bf16"

        torch.manual_seed(self.seed)  # parameter init only; all sampling uses nitro.core.rng keys
        self.policy = ActorCritic(self.obs_dim, self.env.action_space, cfg.policy, d).to(d)
        self.dist_head = self.policy.dist
        self.opt = FlatAdam(self.policy, p.lr, eps=p.adam_eps)
        dist.broadcast_(self.opt.flat, self.dist)
        self.obs_rms = RunningMeanStd((self.obs_dim,), d)
        self.ret_rms = RunningMeanStd((), d)

        # who the learner plays (multi-agent envs): a league of snapshots and bots, or itself on every seat
        lg = cfg.league
        self.league = league.League(lg) if lg.pool_size or lg.bots else None
        self.stack = PolicyStack(self.policy, lg.pool_size, self.obs_dim, p.obs_norm, lg.opponent_eval) \
            if lg.pool_size else None
        if self.league and stage_mix is not None:
            self.league.mix = dict(stage_mix)
        self.reward_weights = torch.tensor([lg.dense_reward, lg.outcome_reward], device=d)
        """[dense, outcome]: what the learner is trained on (multi-agent envs)."""

        self.update, self.global_step = 0, 0
        if self.stack is not None:
            self._snapshot()  # the initial policy is the pool's first member
        key = rng.key(self.seed, d)
        self.learn_key = rng.fold_in(key, 3)
        self._setup_env(self.env, rng.env_keys(key, self.N))
        # device accumulators, read (and zeroed) only at a log
        self.ep_stats = torch.zeros(3, device=d)  # episodes, return sum, length sum
        self.obs_moments = torch.zeros(2, self.obs_dim, device=d)
        self.ret_moments = torch.zeros(2, device=d)
        self.loss_stats = torch.zeros(7, device=d)  # pg, v, entropy, kl, clipfrac, grad norm, minibatches
        self.update_index = torch.zeros((), dtype=torch.int64, device=d)
        self.overflow = torch.zeros((), dtype=torch.int64, device=d)
        """ppo.decisions: decisions that found no slot (the env's max_decisions bound was wrong; 0)."""
        self.first_bad_update = torch.full((), -1, dtype=torch.int64, device=d)
        self.phases = PhaseTimer(d)
        self.recent = RecentEpisodes(p.target_episodes)
        """The episodes ppo.target_return is judged on."""
        self.outcome = ""
        """One line saying how the last train() ended (target reached or not, interrupted)."""
        self.start_time = time.monotonic()
        self.last_save_time: float | None = None

        self.rollout_step = fast.compile(self._rollout_step) if self.compiled else self._rollout_step
        self.loss_fn = fast.compile(self._losses) if self.compiled else self._losses

        self.run_dir = Path(run_dir) if run_dir else None
        self.watch = None
        """Soccar replays and live viewing of the rollouts (cfg.monitor), or None: nothing recorded."""
        if self.dist.is_main and (cfg.monitor.replay_every or cfg.monitor.render != "none"):
            from nitro.monitor.watch import TrainingWatch  # the viewers' packages load only when asked for

            self.watch = TrainingWatch.for_run(cfg.monitor, self.env, self.carry.env_state, self.T, self.run_dir)
        self.lock = rundir.RunLock(self.run_dir) if self.run_dir and self.dist.is_main else None
        self.keeper = None
        self.last_checkpoint: Path | None = None
        self.resumed_at: tuple[int, int] | None = None
        """(update, global_step) of the checkpoint this run continued from."""
        if self.lock is not None:
            self._claim(continuing=resume is not None and _inside(Path(resume), self.run_dir))
        if self.curriculum:
            self._enter_stage()  # the first stage's reward weights (its env and mix are in place already)
        if resume:
            self.restore(resume)
        self.graph = None

    def _setup_env(self, env, env_keys: torch.Tensor) -> None:
        """Seats, opponents, fresh episodes and rollout storage for ``env`` (at start, and when a
        curriculum stage changes the env's params)."""
        d, N = self.device, self.N
        if env.observation_space.shape != (self.obs_dim,) or env.action_space != self.env.action_space:
            raise ConfigError(f"{env} observes {env.observation_space} and acts in {env.action_space}, but the "
                              f"policy was built for Box[{self.obs_dim}] and {self.env.action_space}: a "
                              "curriculum stage may change env params, not the spaces")
        self.env = env
        self.seating = Seating(env, N, self.league is not None, d)
        self.L = self.seating.learner_rows
        self.opponents = None
        if self.league:
            self.opponents = Opponents(self.stack, [env.bots()[b] for b in self.cfg.league.bots], self.dist_head, d)
            self._matchmaking()
        state = env.reset(rng.fold_in(env_keys, 1), N, d)
        match_key = rng.fold_in(env_keys, 4)
        learner_team = rng.randint(rng.fold_in(match_key, 1), (N,), self.seating.order.shape[0])
        opponent = self.opponents.draw(rng.fold_in(match_key, 2)) if self.opponents else \
            torch.zeros(N, dtype=torch.int64, device=d)
        zeros = torch.zeros(self.L, device=d)
        self.carry = Carry(state, env.observe(state).float(), torch.ones(self.L, dtype=torch.bool, device=d),
                           self.policy.initial_hidden(self.L, d), rng.fold_in(env_keys, 2),
                           torch.zeros(N * env.num_agents, device=d), torch.zeros(N, dtype=torch.int32, device=d),
                           zeros, learner_team, opponent)
        self.slots = 0
        """ppo.decisions: K, the decision slots per learner slot and rollout."""
        if self.cfg.ppo.decisions:
            if env.acting(state) is None:
                raise ConfigError(f"ppo.decisions=true is for turn-based envs (Env.acting); in {env} every agent "
                                  "acts every step, so there is nothing to pack: set ppo.decisions=false")
            self.slots = decisions.slots(env.max_decisions(self.T))
            self.carry.pending = self._no_pending()
        self.outcomes = torch.zeros(len(self.league.members) if self.league else 1, 3, device=d)
        """Per opponent id: the learner's wins, draws and losses since the last league step."""
        self.buf = self._buffers()
        self.graph = None

    # ------------------------------------------------------------------ storage
    def _no_pending(self) -> decisions.Pending:
        L, d = self.L, self.device
        a_shape, a_dtype = memory.action_storage(self.env.action_space)
        mask = self.env.action_mask(self.carry.env_state)
        zeros = lambda *shape, dtype=torch.float32: torch.zeros(L, *shape, dtype=dtype, device=d)  # noqa: E731
        return decisions.Pending(zeros(dtype=torch.bool), zeros(self.obs_dim), zeros(*a_shape, dtype=a_dtype), zeros(),
                                 zeros(), zeros(), None if mask is None else zeros(mask.shape[-1], dtype=torch.bool))

    def _buffers(self) -> Buffers:
        T, L, d = self.slots + 1 if self.slots else self.T, self.L, self.device
        a_shape, a_dtype = memory.action_storage(self.env.action_space)
        f = lambda *s: torch.zeros(T, L, *s, device=d)
        mask_probe = self.env.action_mask(self.carry.env_state)
        chunks = T // self.cfg.policy.bptt if self.policy.recurrent else 0
        hidden = tuple(torch.zeros(chunks, L, self.cfg.policy.lstm, device=d) for _ in range(2)) \
            if self.policy.recurrent else ()
        flags = lambda: torch.zeros(T, L, dtype=torch.bool, device=d)  # noqa: E731
        return Buffers(
            obs=f(self.obs_dim), actions=torch.zeros(T, L, *a_shape, dtype=a_dtype, device=d),
            logprobs=f(), values=f(), rewards=f(), dones=flags(), firsts=flags(),
            masks=None if mask_probe is None else torch.zeros(T, L, mask_probe.shape[-1], dtype=torch.bool, device=d),
            hidden=hidden, acting=None if self.slots or self.env.acting(self.carry.env_state) is None else flags(),
            advantages=f(), returns=f(),
            count=torch.zeros(L, dtype=torch.int64, device=d) if self.slots else None,
            trained=torch.zeros(self.slots, L, dtype=torch.bool, device=d) if self.slots else None)

    # ------------------------------------------------------------------ collect
    def _autocast(self):
        """bf16 autocast for policy math when run.precision=bf16 (weights stay fp32)."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def _normalize(self, obs: torch.Tensor) -> torch.Tensor:
        return self.obs_rms.normalize(obs) if self.cfg.ppo.obs_norm else obs

    def _rollout_step(self, c: Carry):
        """Policies, env step and bookkeeping for one step of every env; returns (carry, record, stats)."""
        p, A = self.cfg.ppo, self.env.num_agents
        k_act, k_env, k_next = rng.split(c.key, 3)
        mine, theirs = self.seating.rows(c.learner_team)  # the learner's agent rows, the opponents'
        pick = (lambda x: x) if self.seating.all_rows else (lambda x: x.index_select(0, mine))
        row_keys = agents.row_keys(k_act, A)
        full_mask = self.env.action_mask(c.env_state)
        obs = self._normalize(pick(c.obs))
        mask = None if full_mask is None else pick(full_mask)
        with torch.no_grad(), self._autocast():
            out, value, hidden = self.policy(obs, c.hidden, c.first)
        # detach: a view of a parameter made under no_grad (the expanded log-std) still requires grad,
        # and stored actions must not carry a graph into the update
        out = tree.tree_map(lambda x: x.detach().float(), out)
        if mask is not None:
            out = self.dist_head.mask_logits(out, mask)
        action = self.dist_head.sample(out, self.dist_head.noise(pick(row_keys), self.L))
        logprob = self.dist_head.log_prob(out, action)
        env_action = self.dist_head.to_env(action)
        acting = self.env.acting(c.env_state)
        k_match = rng.fold_in(c.key, 4)
        if self.opponents is not None:
            with torch.no_grad(), self._autocast():
                their_action = self.opponents.act(
                    c.env_state, theirs, c.obs.index_select(0, theirs), None if full_mask is None else
                    full_mask.index_select(0, theirs), c.opponent.repeat_interleave(A - self.seating.per_env),
                    row_keys.index_select(0, theirs), rng.fold_in(k_match, 3), self._learner_actor)
            env_action = self.seating.assemble(env_action, their_action, mine, theirs)

        t = autoreset_step(self.env, c.env_state, env_action, k_env)
        done = t.terminated | t.truncated
        ep_return_rows = c.ep_return + t.reward.float()
        reward = pick(t.reward.float())
        ep_length = c.ep_length + 1
        slot_done = agents.per_agent(done, self.seating.per_env)
        slot_return = pick(ep_return_rows)
        ep_stats = torch.stack([slot_done.sum(), (slot_return * slot_done).sum(),
                                (agents.per_agent(ep_length, self.seating.per_env) * slot_done).sum()]).float()
        obs_moments = torch.stack([pick(c.obs).sum(0), (pick(c.obs) ** 2).sum(0)])
        outcomes, learner_team, opponent = self.outcomes, c.learner_team, c.opponent
        if A > 1:
            reward, outcomes, learner_team, opponent = self._games(c, t, ep_return_rows, reward, done, k_match)

        disc_return = c.disc_return * p.gamma + reward
        ret_moments = torch.stack([disc_return.sum(), (disc_return**2).sum()])
        if p.reward_scale:
            reward = reward / torch.sqrt(self.ret_rms.var + 1e-8)
        if self.env.truncates:  # bootstrap truncated (not terminated) episodes from their final observation
            with torch.no_grad(), self._autocast():
                final_value = self.policy.value(self._normalize(pick(t.final_obs).float()), hidden,
                                                torch.zeros_like(slot_done)).float()
            truncated = agents.per_agent(t.truncated & ~t.terminated, self.seating.per_env)
            reward = reward + p.gamma * final_value * truncated

        keep = ~slot_done
        carry = Carry(t.state, t.obs.float(), slot_done, hidden, k_next, ep_return_rows * ~agents.per_agent(done, A),
                      ep_length * ~done, disc_return * keep, learner_team, opponent, c.pending)
        record = (obs, action, logprob, value.float(), reward, slot_done, c.first, mask,
                  None if acting is None else pick(acting))
        return carry, record, (ep_stats, obs_moments, ret_moments, outcomes)

    def _games(self, c: Carry, t, ep_return_rows, reward, done, key):
        """Multi-agent bookkeeping of finished games: the outcome reward of the learner's rows, the
        learner's wins, draws and losses per opponent id, and new seats and opponents where a game ended."""
        standing = self.env.result(t.final_state)
        scores = self.seating.scores(ep_return_rows if standing is None else standing)  # [N, teams]
        slot_score = scores.gather(1, self.seating.learner_teams(c.learner_team).view(self.N, -1)).view(-1)
        slot_done = agents.per_agent(done, self.seating.per_env)
        reward = self.reward_weights[0] * reward + self.reward_weights[1] * (2 * slot_score - 1) * slot_done
        if self.opponents is None:
            return reward, self.outcomes, c.learner_team, c.opponent
        game = scores.gather(1, c.learner_team[:, None]).squeeze(1)  # the learner team's score
        wdl = torch.stack([game > 0.5, game == 0.5, game < 0.5], 1).float() * done[:, None]
        outcomes = torch.zeros_like(self.outcomes).index_add_(0, c.opponent, wdl)
        new_team = rng.randint(rng.fold_in(key, 1), (self.N,), self.seating.order.shape[0])
        learner_team = torch.where(done, new_team, c.learner_team)
        opponent = torch.where(done, self.opponents.draw(rng.fold_in(key, 2)), c.opponent)
        return reward, outcomes, learner_team, opponent

    def _learner_actor(self, obs: torch.Tensor):
        """The learner's actor on raw observations (playing as its own opponent)."""
        return tree.tree_map(lambda x: x.detach(), self.policy.actor(self._normalize(obs)))

    def collect(self) -> None:
        """T steps of every env into the buffers. ``self.carry`` is updated in place at the end, so
        a CUDA graph of this reads and writes the same tensors on every replay."""
        if self.slots:
            return self._collect_decisions()
        b, c = self.buf, self.carry
        chunk = self.cfg.policy.bptt
        for t in range(self.T):
            if self.policy.recurrent and t % chunk == 0:
                for store, h in zip(b.hidden, c.hidden):
                    store[t // chunk].copy_(h * (~c.first).unsqueeze(-1))
            if self.watch is not None:
                self.watch.capture(t, c.env_state, c.first[::self.env.num_agents])  # rows -> envs
            c, rec, stats = self.rollout_step(c)
            obs, action, logprob, value, reward, done, first, mask, acting = rec
            b.obs[t].copy_(obs)
            b.actions[t].copy_(action)
            b.logprobs[t].copy_(logprob)
            b.values[t].copy_(value)
            b.rewards[t].copy_(reward)
            b.dones[t].copy_(done)
            b.firsts[t].copy_(first)
            if b.masks is not None:
                b.masks[t].copy_(mask)
            if b.acting is not None:
                b.acting[t].copy_(acting)
            self._accumulate(stats)
        tree.copy_(self.carry, c)

    def _accumulate(self, stats) -> None:
        self.ep_stats += stats[0]
        self.obs_moments += stats[1]
        self.ret_moments += stats[2]
        if self.opponents is not None:
            self.outcomes += stats[3]

    def _collect_decisions(self) -> None:
        """ppo.decisions: T steps of every env, each learner slot's decisions packed into its column of
        the buffers (``nitro.train.decisions``): the carried-over decision in slot 0, then one slot per
        decision, rewards summed onto the slot's last decision until its episode ends."""
        b, c, K = self.buf, self.carry, self.slots
        pending = c.pending
        fields = [(b.obs, pending.obs), (b.actions, pending.action), (b.logprobs, pending.logprob),
                  (b.values, pending.value), (b.rewards, pending.reward)]
        if b.masks is not None:
            fields.append((b.masks, pending.mask))
        for store, x in fields:
            store[0].copy_(x)
        b.dones[0].zero_()
        count, open_ = pending.open.long(), pending.open
        for t in range(self.T):
            if self.watch is not None:
                self.watch.capture(t, c.env_state, c.first[::self.env.num_agents])  # rows -> envs
            c, rec, stats = self.rollout_step(c)
            obs, action, logprob, value, reward, done, _, mask, acting = rec
            fits = acting & (count < K)
            self.overflow += (acting & ~fits).sum()
            slot = torch.where(fits, count, K)  # row K: the discard row
            for store, x in zip((b.obs, b.actions, b.logprobs, b.values, b.masks), (obs, action, logprob, value, mask)):
                if store is not None:
                    decisions.store(store, slot, x)
            count = count + fits
            open_ = open_ | fits
            last = torch.where(open_, count - 1, K)
            decisions.store(b.rewards, last, torch.where(fits, 0.0, decisions.read(b.rewards, last)) + reward)
            decisions.store(b.dones, last, done)
            open_ = open_ & ~done
            self._accumulate(stats)
        b.count.copy_(count)
        b.trained.copy_(decisions.trained(count, b.dones[:K]))
        last = (count - 1).clamp(min=0)
        c.pending = decisions.Pending(open_, *(None if x is None else decisions.read(x, last) for x in
                                               (b.obs, b.actions, b.logprobs, b.values, b.rewards, b.masks)))
        tree.copy_(self.carry, c)

    # ------------------------------------------------------------------ advantages
    def compute_advantages(self) -> None:
        """GAE(gamma, lambda) over the rollout, bootstrapped from the value of the last observation (with
        ppo.decisions: over each learner slot's decisions, ``decisions.gae``)."""
        p, b, c = self.cfg.ppo, self.buf, self.carry
        if self.slots:
            K = self.slots
            b.advantages[:K].copy_(decisions.gae(b.rewards[:K], b.values[:K], b.dones[:K], b.trained, p.gamma,
                                                 p.gae_lambda))
            b.returns.copy_(b.advantages + b.values)
            return
        obs = c.obs if self.seating.all_rows else c.obs.index_select(0, self.seating.rows(c.learner_team)[0])
        with torch.no_grad(), self._autocast():
            next_value = self.policy.value(self._normalize(obs), c.hidden, c.first).float()
        b.advantages.copy_(gae(b.rewards, b.values, b.dones, next_value, p.gamma, p.gae_lambda))
        b.returns.copy_(b.advantages + b.values)

    def update_normalizers(self) -> None:
        n = self.T * self.L
        for rms, moments in ((self.obs_rms, self.obs_moments), (self.ret_rms, self.ret_moments)):
            dist.all_reduce_sum_(moments, self.dist)
            total = n * self.dist.world_size
            mean = moments[0] / total
            rms.update_from_moments(mean, (moments[1] / total - mean**2).clamp(min=0), total)
            moments.zero_()

    # ------------------------------------------------------------------ update
    def learn(self) -> None:
        """Epochs x minibatches of PPO over the rollout. Minibatches are sets of sequences (learner-slot
        columns of length T, or BPTT chunks with an LSTM), so one path serves both policies."""
        p, b = self.cfg.ppo, self.buf
        L = self.cfg.policy.bptt if self.policy.recurrent else self.T
        C, N = self.T // L, self.L
        S = C * N

        def sequences(x):  # [T, N, ...] -> [L, C * N, ...], sequence c * N + n = chunk c of slot n
            return x if C == 1 else x.view(C, L, N, *x.shape[2:]).transpose(0, 1).reshape(L, S, *x.shape[2:])

        if self.slots:  # decision slots, each a sequence of one step (feed-forward policies only)
            S = self.slots * N
            sequences = lambda x: x[:self.slots].reshape(1, S, *x.shape[2:])  # noqa: E731
        data = [sequences(x) for x in (b.obs, b.actions, b.logprobs, b.values, b.advantages, b.returns,
                                       b.firsts)]
        masks = sequences(b.masks) if b.masks is not None else None
        acting = b.trained.view(1, S) if self.slots else sequences(b.acting) if b.acting is not None else None
        hidden = tuple(h.reshape(S, -1) for h in b.hidden)
        mb = S // p.minibatches
        for epoch in range(p.epochs):
            perm = torch.argsort(rng.uniform(rng.fold_in(self.learn_key, epoch + 1), (S,)))
            for m in range(p.minibatches):
                ids = perm[m * mb : (m + 1) * mb]
                batch = [x.index_select(1, ids) for x in data]
                mask = masks.index_select(1, ids) if masks is not None else None
                weight = acting.index_select(1, ids).float() if acting is not None else None
                self._minibatch(batch, mask, tuple(h.index_select(0, ids) for h in hidden), weight)
        self.learn_key.copy_(rng.fold_in(self.learn_key, 0))

    def _losses(self, batch, mask, hidden, weight=None):
        """PPO loss of one minibatch and its stats [pg, v, entropy, approx_kl, clipfrac]. ``weight``
        (turn-based envs) is 1 where the slot acted: only those steps enter the policy terms."""
        p = self.cfg.ppo
        obs, actions, old_logprob, old_value, adv, ret, firsts = batch
        with self._autocast():
            out, value = self.policy.forward_sequence(obs, hidden, firsts)
        out = tree.tree_map(lambda x: x.float(), out)
        if mask is not None:
            out = self.dist_head.mask_logits(out, mask)
        logprob = self.dist_head.log_prob(out, actions)
        entropy = masked_mean(self.dist_head.entropy(out), weight)
        if p.norm_adv:
            adv = normalize_advantages(adv, weight)
        pg_loss, v_loss, approx_kl, clipfrac = ppo_losses(logprob, old_logprob, adv, value.float(), old_value,
                                                          ret, p.clip_coef, p.clip_vloss, weight,
                                                          weight if self.slots else None)
        loss = pg_loss - p.ent_coef * entropy + p.vf_coef * v_loss
        return loss, torch.stack([pg_loss, v_loss, entropy, approx_kl, clipfrac]).detach()

    def _minibatch(self, batch, mask, hidden, weight=None) -> None:
        p = self.cfg.ppo
        loss, stats = self.loss_fn(batch, mask, hidden, weight)
        self.opt.zero_grad()
        loss.backward()
        grad = dist.all_reduce_mean_(self.opt.grad, self.dist)
        grad_norm = grad.norm()
        finite = torch.isfinite(grad_norm) & torch.isfinite(loss)
        grad.mul_(torch.where(finite, (p.max_grad_norm / (grad_norm + 1e-6)).clamp(max=1.0), 0.0))
        self.first_bad_update.copy_(torch.where(~finite & (self.first_bad_update < 0), self.update_index,
                                                self.first_bad_update))
        self.opt.step(apply=finite)  # a non-finite minibatch changes nothing; the next log stops the run
        self.loss_stats += torch.cat([stats, grad_norm.detach().view(1), torch.ones(1, device=self.device)])

    # ------------------------------------------------------------------ one iteration
    def iteration(self) -> None:
        """All device work of one update; no host syncs (safe to capture in a CUDA graph)."""
        self.phases.mark(0)
        self.collect()
        self.phases.mark(1)
        self.compute_advantages()
        self.update_normalizers()
        self.learn()
        self._flag_nonfinite_state()
        self.phases.mark(2)
        self.update_index += 1

    def _flag_nonfinite_state(self) -> None:
        """Record (on the device) whether this update left the parameters, optimizer moments or
        normalizers non-finite; the minibatches record non-finite losses and gradients themselves."""
        learner = [self.opt.flat, *self.opt.state().values(), *self.obs_rms.state().values(),
                   *self.ret_rms.state().values()]
        finite = torch.stack([torch.isfinite(x).all() for x in learner if x.is_floating_point()]).all()
        self.first_bad_update.copy_(torch.where(~finite & (self.first_bad_update < 0), self.update_index,
                                                self.first_bad_update))

    def _state_tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor that evolves during training, by name (checkpoints, graph warm-up)."""
        out = {f"policy.{k}": v for k, v in self.policy.state_dict().items()}
        out.update({f"optim.{k}": v for k, v in self.opt.state().items()})
        out.update({f"obs_rms.{k}": v for k, v in self.obs_rms.state().items()})
        out.update({f"ret_rms.{k}": v for k, v in self.ret_rms.state().items()})
        for i, leaf in enumerate(tree.leaves(self.carry)):
            out[f"carry.{i}"] = leaf
        if self.stack is not None:
            out.update({f"pool.{k}": v for k, v in self.stack.tensors().items()})
        if self.opponents is not None:
            out.update({"opponent_probs": self.opponents.probs, "outcomes": self.outcomes})
        if self.env.num_agents > 1:
            out["reward_weights"] = self.reward_weights
        out.update({"learn_key": self.learn_key, "ep_stats": self.ep_stats, "loss_stats": self.loss_stats,
                    "update_index": self.update_index, "first_bad_update": self.first_bad_update,
                    "decision_overflow": self.overflow,
                    "obs_moments": self.obs_moments, "ret_moments": self.ret_moments})
        return out

    def _capture(self) -> None:
        """Record one iteration as a CUDA graph. The warm-up iterations (compilation, allocator,
        NCCL set-up) run for real, so every training tensor is restored afterwards."""
        saved = {k: v.clone() for k, v in self._state_tensors().items()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.iteration()
        torch.cuda.current_stream().wait_stream(side)
        self._restore_tensors(saved)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.iteration()

    def _restore_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Copy saved values into the live tensors in place (addresses captured by a graph stay valid)."""
        live = self._state_tensors()
        missing = sorted(set(live) - set(tensors))
        if missing:
            raise ValueError(f"checkpoint lacks {len(missing)} tensors, e.g. {missing[:3]}; it was written "
                             "by a different env or policy config")
        with torch.no_grad():
            for k, v in live.items():
                if tuple(v.shape) != tuple(tensors[k].shape):
                    raise ValueError(f"checkpoint tensor {k} has shape {list(tensors[k].shape)}, this run "
                                     f"expects {list(v.shape)} (different num_envs or policy size?)")
                v.copy_(tensors[k])

    # ------------------------------------------------------------------ run directory and checkpoints
    def _claim(self, continuing: bool) -> None:
        """Take the run directory's lock; refuse a directory that holds another run."""
        self.lock.acquire()
        if not continuing and rundir.holds_run(self.run_dir):
            self.close()
            raise rundir.RunDirError(f"{self.run_dir} already holds a run; give a new run directory, or "
                                     f"continue that run with: nitro train --resume {self.run_dir}")
        checkpoint.remove_stale_temporaries(self.run_dir)
        self.keeper = checkpoint.Keeper(self.run_dir, self.cfg.run.keep_last)

    def close(self) -> None:
        """Release the run directory (train() does this when it ends)."""
        if self.lock is not None:
            self.lock.release()

    def save(self, score: float | None) -> Path | None:
        """Checkpoint the current state, after checking on the host that no update so far went bad."""
        if self.keeper is None:
            return None
        self._check_finite()
        meta = {"update": self.update, "global_step": self.global_step, "config": to_dict(self.cfg),
                "world_size": self.dist.world_size, "threads": torch.get_num_threads(),
                "recent_episodes": self.recent.intervals}
        if self.league:
            meta["league"] = self.league.state()
        if self.curriculum:
            meta["curriculum"] = self.curriculum.state()
        self.last_checkpoint = self.keeper.save(self.update, self._state_tensors(), meta, score)
        self.last_save_time = time.monotonic()
        return self.last_checkpoint

    def _check_finite(self) -> None:
        with torch.no_grad():
            finite = torch.stack([torch.isfinite(v).all() for v in self._state_tensors().values()
                                  if v.is_floating_point()]).all()
            first_bad, ok = torch.stack([self.first_bad_update.float(), finite.float()]).tolist()  # sync-ok
        if first_bad >= 0 or ok < 1:
            raise self._diverged(int(first_bad))

    def _diverged(self, first_bad: int) -> TrainingDiverged:
        where = f"update {first_bad + 1}" if first_bad >= 0 else f"an update up to {self.update}"
        last = self.last_checkpoint or "none (no checkpoint was written yet)"
        return TrainingDiverged(f"non-finite loss, gradients or parameters at {where}; last good checkpoint: "
                                f"{last}")

    def restore(self, path: str | Path) -> None:
        """Load a checkpoint file, or a run directory's newest readable checkpoint (naming, on stderr,
        the newer ones that could not be read; a run's own unreadable files are set aside). This run's
        own directory without any checkpoint yet (killed before its first) starts from the beginning."""
        path = Path(path)
        if path.is_dir() and not checkpoint.checkpoints(path) and self.lock is not None \
                and _inside(path, self.run_dir):
            print(f"nitro: {path} has no checkpoint yet; starting it from the beginning", file=sys.stderr)
            self.resumed_at = (0, 0)
            return
        if path.is_dir():
            path, tensors, meta, skipped = checkpoint.load_latest(path, self.device)
            for bad, why in skipped:
                owned = self.lock is not None and _inside(bad, self.run_dir)
                moved = f"; renamed to {checkpoint.set_aside(bad).name}" if owned else ""
                print(f"nitro: skipped unreadable checkpoint {bad} ({why}){moved}", file=sys.stderr)
            if skipped:
                print(f"nitro: resuming from {path} (update {meta['update']})", file=sys.stderr)
        else:
            tensors, meta = checkpoint.load(path, self.device)
        if self.curriculum and "curriculum" in meta:
            self.curriculum.load_state(meta["curriculum"])
            self._enter_stage()  # the stage's env first: the carry's shapes follow it
        if self.league and "league" in meta:
            self.league.load_state(meta["league"], league.read_history(path.parent.parent))
            self._matchmaking()  # (its probabilities come back with the tensors below)
        if self.dist.enabled or meta.get("world_size", 1) > 1:
            # rollout state is per rank; restore the learner and start fresh episodes
            tensors = {k: v for k, v in tensors.items() if not k.startswith("carry.")}
            tensors.update({k: v for k, v in self._state_tensors().items() if k.startswith("carry.")})
        self._restore_tensors(tensors)
        self.update, self.global_step = meta["update"], meta["global_step"]
        self.recent.intervals = meta.get("recent_episodes", [])
        self.resumed_at = (self.update, self.global_step)
        self.last_checkpoint = path

    # ------------------------------------------------------------------ league and curriculum
    def _snapshot(self) -> None:
        """Put the learner's current actor into the pool, in the slot the league's drop rule frees."""
        slot = self.league.add_snapshot(self.update)
        self.stack.load_(slot, self.policy.state_dict(), self.obs_rms.mean, self.obs_rms.var)

    def _matchmaking(self) -> None:
        """Where new games go, from the league's ratings and mix (in place: graphs read it)."""
        self.opponents.probs.copy_(torch.tensor(self.league.probs(), device=self.device))
        self.opponents.use_self = self.league.mix.get(league.SELF, 0) > 0  # static: graphs are recaptured on change

    def _league_step(self) -> dict:
        """Rate the games since the last league step, add a snapshot when due, redo matchmaking. Reads the
        outcome counts: one host sync per league step."""
        dist.all_reduce_sum_(self.outcomes, self.dist)  # every rank rates the same games the same way
        outcomes = self.outcomes.tolist()  # sync-ok: once per league step
        self.outcomes.zero_()
        metrics = self.league.record(outcomes, self.update)
        if self.stack is not None and self.update % self.cfg.league.add_every == 0:
            self._snapshot()
        self._matchmaking()
        return metrics

    def _enter_stage(self) -> None:
        """Apply the curriculum's settings in force: env params (a new env, fresh episodes and a new
        graph where they change), reward weights and the opponent mix."""
        env_params, reward, mix = self.curriculum.settings()
        params = {**self.cfg.env.params, **env_params}
        if params != self.env_params:
            stage_key = rng.fold_in(rng.key(self.seed, self.device), 100 + self.curriculum.index)
            self._setup_env(make_env(self.cfg.env.id, **params), rng.env_keys(stage_key, self.N))
            self.env_params = params
        lg = self.cfg.league
        self.reward_weights.copy_(torch.tensor([reward.get("dense", lg.dense_reward),
                                                reward.get("outcome", lg.outcome_reward)]))
        if mix is not None:
            self.league.mix = dict(mix)
            self._matchmaking()
        self.graph = None

    # ------------------------------------------------------------------ the loop
    def _lr(self) -> float:
        p = self.cfg.ppo
        frac = 1.0 - self.update / self.num_updates if p.lr_schedule == "linear" else 1.0
        return p.lr * frac

    def _read_metrics(self, since: float, steps: int) -> dict:
        """The one host sync of a log interval: reduce over ranks, read, zero the accumulators.
        ``since`` is the clock at the previous log; SPS counts up to the end of this sync."""
        dist.all_reduce_sum_(self.ep_stats, self.dist)
        dist.all_reduce_sum_(self.loss_stats, self.dist)
        with torch.no_grad():
            b = self.buf
            if self.slots:
                explained = explained_variance(b.returns[:self.slots], b.values[:self.slots], b.trained.float())
            else:
                explained = explained_variance(b.returns, b.values, None)
            flags = torch.stack([self.first_bad_update.float(), torch.isfinite(self.opt.flat).all().float(),
                                 explained, self.overflow.float()])
        values = torch.cat([self.ep_stats, self.loss_stats, flags]).tolist()  # sync-ok: the log's one sync
        ep, ls, fl, ev = values[:3], values[3:10], values[10:12], values[12]
        elapsed = time.perf_counter() - since
        self.ep_stats.zero_()
        self.loss_stats.zero_()
        if fl[0] >= 0 or fl[1] < 1:
            raise self._diverged(int(fl[0]))
        if values[13]:
            raise NitroError(f"{self.env} reported at most {self.slots - 1} decisions per agent in {self.T} steps "
                             f"(max_decisions), but {int(values[13])} decisions found no slot; the env's bound "
                             "is wrong: fix its max_decisions, or train with ppo.decisions=false")
        n_mb = max(ls[6], 1)
        m = {"update": self.update, "global_step": self.global_step, "perf/sps": steps / max(elapsed, 1e-9),
             "loss/policy": ls[0] / n_mb, "loss/value": ls[1] / n_mb, "loss/entropy": ls[2] / n_mb,
             "loss/approx_kl": ls[3] / n_mb, "loss/clipfrac": ls[4] / n_mb, "loss/grad_norm": ls[5] / n_mb,
             "loss/explained_variance": ev, "lr": self._lr()}
        if ep[0] > 0:
            m.update({"episode/return": ep[1] / ep[0], "episode/length": ep[2] / ep[0], "episode/count": ep[0]})
        self.recent.add(ep[0], ep[1])
        if self.recent.episodes:
            m.update({"episode/return_recent": self.recent.mean_return,
                      "episode/recent_episodes": self.recent.episodes})
        return m

    def train(self, on_log=None) -> dict:
        """Run to ``ppo.total_steps`` (or ``ppo.target_return``); returns the last metrics (with
        ``target_reached`` when a target is set) and sets ``outcome``. Ctrl-C and SIGTERM save a
        checkpoint and raise ``TrainingInterrupted``."""
        from nitro.monitor.logger import Console, MetricsWriter

        cfg = self.cfg
        main = self.dist.is_main
        writer = None
        if self.lock is not None:
            self._claim(continuing=True)
            writer = MetricsWriter(self.run_dir, cfg.run.tensorboard, *(self.resumed_at or (None, None)))
            checkpoint.write_atomic(self.run_dir / "config.yaml",
                                    yaml.safe_dump(to_dict(cfg), sort_keys=False).encode())
        console = Console(cfg.ppo.total_steps, cfg.env.id, cfg.run.console and main)
        steps_per_update = self.N * self.T * self.dist.world_size
        status = RunStatus(self.run_dir, {"env": cfg.env.id, "total_steps": self.num_updates * steps_per_update,
                                          "device": str(self.device), "num_envs": self.N,
                                          "world_size": self.dist.world_size}) if writer else None
        if self.league and self.run_dir and main:
            league.write_history(self.run_dir, self.league.history)  # a resumed run drops what came after
        league_metrics: dict = {}
        t0 = time.perf_counter()
        if self.graphed and self.graph is None:
            self._capture()
        self.setup_seconds = time.perf_counter() - t0
        metrics: dict = {"update": self.update, "global_step": self.global_step}
        last_log, last_step = time.perf_counter(), self.global_step
        self.train_seconds = 0.0
        reached = False
        stop = StopSignals().install()
        try:
            while self.update < self.num_updates:
                self.opt.lr.fill_(self._lr())
                if self.graphed and self.graph is None:
                    self._capture()  # a curriculum stage changed the env
                if self.graph is not None:
                    self.graph.replay()
                else:
                    self.iteration()
                self.update += 1
                self.global_step += steps_per_update
                if self.watch is not None:
                    self.watch.after_update(self.update)
                final = self.update >= self.num_updates
                if self.league and self.update % cfg.league.update_every == 0:
                    league_metrics.update(self._league_step())  # syncs
                    if self.run_dir and main:
                        league.append_history(self.run_dir, self.league.history[-1])
                logged = self.update % cfg.run.log_every == 0 or final
                if logged:
                    metrics = self._read_metrics(last_log, self.global_step - last_step)  # syncs
                    metrics.update(league_metrics)  # the league steps' since the last log
                    league_metrics = {}
                    now = time.perf_counter()
                    self.train_seconds += now - last_log
                    metrics["perf/train_seconds"] = self.train_seconds
                    last_log, last_step = time.perf_counter(), self.global_step
                    if self.curriculum:
                        if self.curriculum.observe(metrics, self.update):
                            self._enter_stage()
                            console.note(f"curriculum: {self.curriculum.events[-1]}")
                        metrics["curriculum/stage"] = self.curriculum.index
                    metrics.update(self.phases.metrics(steps_per_update))
                    metrics.update(device_stats(self.device))
                    if writer:
                        writer.write(self.global_step, metrics)
                        status.beat(metrics)
                    console.update(metrics)
                    if on_log:
                        on_log(metrics)
                    reached = self.recent.reached(cfg.ppo.target_return)
                    final = final or reached
                signum = stop.agreed(self.dist, logged)
                if self.update % cfg.run.checkpoint_every == 0 or final or signum or self._checkpoint_due():
                    self.save(metrics.get("episode/return_recent"))
                if signum:
                    raise self._interrupted(signum)
                if final:
                    break
        except BaseException as error:
            if status:
                status.end(error)
            raise
        else:
            if status:
                status.end()
        finally:
            stop.restore()
            if self.watch is not None:
                self.watch.close()
            console.close()
            if writer:
                writer.close()
            self.close()
        if cfg.ppo.target_return is not None:
            metrics["target_reached"] = reached
        self.outcome = target.outcome(self.recent, self.global_step, cfg.ppo.target_return, cfg.ppo.total_steps)
        return metrics

    def _checkpoint_due(self) -> bool:
        """run.checkpoint_seconds have passed since the last checkpoint (or the start of this run)."""
        since = self.last_save_time if self.last_save_time is not None else self.start_time
        return 0 < self.cfg.run.checkpoint_seconds <= time.monotonic() - since

    def _interrupted(self, signum: int) -> TrainingInterrupted:
        saved = f"saved {self.last_checkpoint}" if self.last_checkpoint else "nothing saved"
        resume = f"; continue with: nitro train --resume {self.run_dir}" if self.run_dir else ""
        self.outcome = f"stopped by {signal.Signals(signum).name} at update {self.update}; {saved}{resume}"
        return TrainingInterrupted(self.outcome, signum)


def _inside(path: Path, folder: Path) -> bool:
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path == folder or folder in path.parents


def masked_mean(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """The mean of ``x``, or its mean over the samples where ``weight`` is 1."""
    return x.mean() if weight is None else (x * weight).sum() / weight.sum().clamp(min=1)


def explained_variance(returns: torch.Tensor, values: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """1 - Var(returns - values) / Var(returns), over the samples where ``weight`` is 1."""
    def var(x):
        return masked_mean((x - masked_mean(x, weight)) ** 2, weight)

    return 1 - var(returns - values) / var(returns)


def normalize_advantages(adv: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Zero mean, unit (unbiased) standard deviation, over the samples where ``weight`` is 1."""
    if weight is None:
        return (adv - adv.mean()) / (adv.std() + 1e-8)
    mean = masked_mean(adv, weight)
    var = ((adv - mean) ** 2 * weight).sum() / (weight.sum() - 1).clamp(min=1)
    return (adv - mean) / (var.sqrt() + 1e-8)


def ppo_losses(logprob, old_logprob, adv, value, old_value, ret, clip_coef: float, clip_vloss: bool, weight=None,
               value_weight=None):
    """Clipped surrogate and value losses of the PPO paper; returns (pg_loss, v_loss, approx_kl, clipfrac).

    approx_kl is the low-variance estimator E[(r - 1) - log r] (Schulman, "Approximating KL divergence").
    ``weight`` (0/1 per sample, or None for all) restricts the policy terms to the samples where an agent
    acted; ``value_weight`` likewise the value loss (None: every sample).
    """
    logratio = logprob - old_logprob
    ratio = logratio.exp()
    pg_loss = masked_mean(torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)), weight)
    if clip_vloss:
        clipped = old_value + (value - old_value).clamp(-clip_coef, clip_coef)
        v_loss = 0.5 * masked_mean(torch.max((value - ret) ** 2, (clipped - ret) ** 2), value_weight)
    else:
        v_loss = 0.5 * masked_mean((value - ret) ** 2, value_weight)
    with torch.no_grad():
        approx_kl = masked_mean((ratio - 1) - logratio, weight)
        clipfrac = masked_mean(((ratio - 1).abs() > clip_coef).float(), weight)
    return pg_loss, v_loss, approx_kl, clipfrac


def gae(rewards, values, dones, next_value, gamma: float, lam: float) -> torch.Tensor:
    """Generalized advantage estimation over [T, N] tensors; ``dones[t]`` ends the episode after step t."""
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(T)):
        nonterminal = 1.0 - dones[t].float()
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv


def run_dir_for(cfg: TrainConfig) -> Path:
    """Create the directory of a new run: ``run.dir/run.name`` (refused if it holds a run) or a unique
    ``run.dir/<env>-<time>[-k]``."""
    return rundir.new_run_dir(cfg.run.dir, cfg.run.name, cfg.env.id)
