"""Connect Four, batched: the rules, observations and rewards of PettingZoo's ``connect_four_v3``
(``pettingzoo/classic/connect_four/connect_four.py``) as a two-agent, turn-based nitro env.

Seats ``player_0`` (row ``2e``) and ``player_1`` (row ``2e + 1``) drop stones into a 6 x 7 board in
turn, ``player_0`` first; four in a row (across, down or diagonal) wins, a full board is a draw. The
winner gets +1 and the loser -1 on the final move; playing a full column ends the game with -1 for the
mover and 0 for the other (PettingZoo's ``TerminateIllegalWrapper``). Each agent sees PettingZoo's
(6, 7, 2) board, flattened: channel 0 its own stones, channel 1 the opponent's, row 0 at the top.

The board is two bitboards (one int64 per player and env) in the column-major layout of Pascal Pons'
solver: bit ``col * 7 + row`` (row 0 at the bottom, row 6 an always-empty sentinel), so four in a row is
four shifted ANDs. ``bots()`` offers a uniform ``random`` player and ``tactical``: win now if possible,
else block the opponent's immediate win, else avoid moves that let the opponent win on top of them, else
prefer central columns, ties broken at random.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nitro.core import agents, rng
from nitro.core.env import Env
from nitro.core.spaces import Box, Discrete

ROWS, COLS = 6, 7
CELLS = ROWS * COLS
DIRECTIONS = (1, 7, 6, 8)
"""Bit shifts between neighbours on the bitboard: vertical, horizontal, and the two diagonals."""


@dataclass(frozen=True)
class ConnectFourParams:
    opening_moves: int = 0
    """Uniformly random plies played at reset (0-6: too few for anyone to win), so that games between
    deterministic players differ; the seat to move next is then ``opening_moves % 2``."""
    win_reward: float = 1.0
    """Reward of the winner on its final move; the loser gets the negative."""
    illegal_reward: float = -1.0
    """Reward of an agent that drops into a full column; the game ends there (the other agent gets 0)."""

    def __post_init__(self):
        if not 0 <= self.opening_moves <= 6:
            raise ValueError(f"opening_moves must lie in 0..6 (seven plies can already win), got "
                             f"{self.opening_moves}")


@dataclass
class ConnectFourState:
    stones: torch.Tensor
    """[N, 2] int64 bitboards of player_0's and player_1's stones."""
    height: torch.Tensor
    """[N, 7] int64 stones in each column."""
    to_move: torch.Tensor
    """[N] int64 seat whose turn it is."""
    moves: torch.Tensor
    """[N] int64 stones on the board."""
    winner: torch.Tensor
    """[N] int64 seat that won (-1 while nobody has, and after a draw)."""


def connected(board: torch.Tensor) -> torch.Tensor:
    """True where a bitboard (int64, any shape) holds four in a row."""
    four = torch.zeros_like(board, dtype=torch.bool)
    for s in DIRECTIONS:
        pairs = board & (board >> s)
        four = four | ((pairs & (pairs >> (2 * s))) != 0)
    return four


def empty_board(num_envs: int, device) -> ConnectFourState:
    zero = torch.zeros(num_envs, dtype=torch.int64, device=device)
    return ConnectFourState(torch.zeros(num_envs, 2, dtype=torch.int64, device=device),
                            torch.zeros(num_envs, COLS, dtype=torch.int64, device=device), zero, zero.clone(), zero - 1)


def cell_bits(device) -> torch.Tensor:
    """[42] the bit of each board cell in PettingZoo's order (row 0 at the top, then columns); built on
    the device by arithmetic, as constants copied from the host would stall CUDA graphs."""
    cell = torch.arange(CELLS, device=device)
    return (cell % COLS) * (ROWS + 1) + (ROWS - 1 - cell // COLS)


def centrality(device) -> torch.Tensor:
    """[7] how central each column is: 0 at the edges, 3 in the middle (the tactical bot's tie-break)."""
    return 3 - (torch.arange(COLS, device=device) - 3).abs()


def cell_bit(column: torch.Tensor, height: torch.Tensor) -> torch.Tensor:
    """The bit of the cell at ``height`` in ``column`` (int64 tensors of one shape)."""
    return torch.ones_like(column) << (column * (ROWS + 1) + height)


class ConnectFour(Env[ConnectFourState, ConnectFourParams]):
    Params = ConnectFourParams
    observation_space = Box.of(0.0, 1.0, (ROWS * COLS * 2,))
    action_space = Discrete(COLS)
    num_agents = 2
    agent_team = (0, 1)

    # ------------------------------------------------------------------ reset and step
    def reset(self, key, num_envs, device):
        state = empty_board(num_envs, device)
        play = torch.ones(num_envs, dtype=torch.bool, device=device)
        for k in rng.split(key, self.params.opening_moves):  # no column fills and nobody wins in <= 6
            state = self._drop(state, rng.randint(k, (num_envs,), COLS), play)
        return state

    def _drop(self, state: ConnectFourState, column: torch.Tensor, play: torch.Tensor) -> ConnectFourState:
        """The mover's stone into ``column`` [N] where ``play`` (a column with room), the turn passed on."""
        h = state.height.gather(1, column[:, None]).squeeze(1)
        bit = torch.where(play, cell_bit(column, h), 0)[:, None]
        mover = state.to_move[:, None]
        stones = state.stones.scatter(1, mover, state.stones.gather(1, mover) | bit)
        height = state.height + torch.nn.functional.one_hot(column, COLS) * play[:, None]
        return ConnectFourState(stones, height, torch.where(play, 1 - state.to_move, state.to_move),
                                state.moves + play, state.winner)

    def step(self, state, action, key):
        p = self.params
        column = action.view(-1, 2).gather(1, state.to_move[:, None]).squeeze(1)
        legal = state.height.gather(1, column[:, None]).squeeze(1) < ROWS
        nxt = self._drop(state, column, legal)
        won = legal & connected(nxt.stones.gather(1, state.to_move[:, None]).squeeze(1))
        full = legal & (nxt.moves == CELLS)
        nxt.winner = torch.where(won, state.to_move, torch.where(legal, state.winner, 1 - state.to_move))
        mover_reward = torch.where(legal, torch.where(won, p.win_reward, 0.0), p.illegal_reward)
        other_reward = torch.where(won, -p.win_reward, 0.0)
        is_mover = self.acting(state)
        reward = torch.where(is_mover, agents.per_agent(mover_reward, 2), agents.per_agent(other_reward, 2))
        terminated = won | full | ~legal
        return nxt, self.observe(nxt), reward, terminated, torch.zeros_like(terminated)

    def from_moves(self, sequences: list[str], device=None) -> ConnectFourState:
        """States after the given games, each a string of columns 1-7 in playing order (Pascal Pons'
        notation, e.g. "4453"), player_0 first; no game may already be over."""
        n, longest = len(sequences), max(map(len, sequences), default=0)
        bad = [s for s in sequences if not set(s) <= set("1234567")]
        if bad:
            raise ValueError(f"move sequences are strings of columns 1-7, got {bad[:3]}")
        cols = torch.tensor([[int(ch) - 1 for ch in s.ljust(longest, "1")] for s in sequences],
                            dtype=torch.int64, device=device).view(n, longest)
        lengths = torch.tensor([len(s) for s in sequences], device=device)
        state = empty_board(n, device)
        for j in range(longest):
            play = j < lengths
            if bool((play & (state.height.gather(1, cols[:, j:j + 1]).squeeze(1) >= ROWS)).any()):  # sync-ok: set-up
                raise ValueError(f"a sequence drops into a full column at move {j + 1}")
            mover = state.to_move
            state = self._drop(state, cols[:, j], play)
            if bool((play & connected(state.stones.gather(1, mover[:, None]).squeeze(1))).any()):  # sync-ok
                raise ValueError(f"a sequence has already been won at move {j + 1}; give positions still in play")
        return state

    # ------------------------------------------------------------------ views
    def observe(self, state):
        bits = cell_bits(state.stones.device)
        cells = ((state.stones[:, :, None] >> bits) & 1).float()       # [N, player, cell]
        planes = cells.transpose(1, 2)                                  # [N, cell, player]
        return torch.stack([planes, planes.flip(-1)], 1).reshape(-1, CELLS * 2)  # own stones first

    def action_mask(self, state):
        """Columns with room, for both agents (the one not to move is ignored by the env)."""
        return agents.per_agent(state.height < ROWS, 2)

    def acting(self, state):
        return agents.seats(state.to_move.shape[0], 2, state.to_move.device) == agents.per_agent(state.to_move, 2)

    def result(self, state):
        """1 for the winner, 0 otherwise (both 0 after a draw)."""
        return (agents.seats(state.winner.shape[0], 2, state.winner.device)
                == agents.per_agent(state.winner, 2)).float()

    def bots(self):
        return {"random": self.random_bot, "tactical": self.tactical_bot}

    # ------------------------------------------------------------------ scripted players
    def random_bot(self, state, key):
        """A uniformly random legal column (the same for both rows; only the mover's is used)."""
        scores = torch.where(state.height < ROWS, rng.uniform(key, (state.height.shape[0], COLS)), -1.0)
        return agents.per_agent(scores.argmax(-1), 2)

    def tactical_bot(self, state, key):
        """Win now; else block; else do not give the opponent a win on top; else central; ties at random."""
        n, device = state.height.shape[0], state.height.device
        mine = state.stones.gather(1, state.to_move[:, None])                 # [N, 1]
        theirs = state.stones.gather(1, 1 - state.to_move[:, None])
        columns = torch.arange(COLS, device=device).expand(n, COLS)
        legal = state.height < ROWS
        here = cell_bit(columns, state.height.clamp(max=ROWS - 1))           # [N, 7]
        above = cell_bit(columns, (state.height + 1).clamp(max=ROWS - 1))
        win_now = legal & connected(mine | here)
        block = legal & connected(theirs | here)
        gives = legal & (state.height + 1 < ROWS) & connected(theirs | above)
        center = centrality(device).float() * 0.25                                      # at most 0.75
        noise = rng.uniform(key, (n, COLS), high=0.25)
        score = 8.0 * win_now + 4.0 * block - 2.0 * gives + center + noise
        return agents.per_agent(torch.where(legal, score, -torch.inf).argmax(-1), 2)
