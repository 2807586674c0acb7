"""A weak Connect Four solver (win / draw / loss with perfect play), the reference for the position set.

Negamax with alpha-beta over Python-int bitboards in Pascal Pons' layout (bit ``col * 7 + row``, row 0 at
the bottom), centre-first move order and a transposition table of bounds. It is exact but slow, so it
is used on positions of 16 or more stones (seconds each at worst). Run this file to regenerate the position set:

    python tests/envs/connect_four_solver.py tests/envs/data/connect_four_positions.txt

Each line of the set is ``MOVES v1 v2 ... v7``: a game in progress as columns 1-7 (player_0 first) and
the value of dropping into each column for the side to move (1 win, 0 draw, -1 loss, x full column).
"""

from __future__ import annotations

import random
import sys

ROWS, COLS = 6, 7
ORDER = (3, 2, 4, 1, 5, 0, 6)
COLUMN = tuple(((1 << ROWS) - 1) << (c * (ROWS + 1)) for c in range(COLS))
BOTTOM = tuple(1 << (c * (ROWS + 1)) for c in range(COLS))
TOP = tuple(1 << (c * (ROWS + 1) + ROWS - 1) for c in range(COLS))


def connected(board: int) -> bool:
    for s in (1, 7, 6, 8):
        pairs = board & (board >> s)
        if pairs & (pairs >> (2 * s)):
            return True
    return False


def drop(mask: int, c: int) -> int:
    """The bit of the lowest empty cell of column ``c``."""
    return (mask + BOTTOM[c]) & COLUMN[c]


def position(moves: str) -> tuple[int, int, int]:
    """(stones of the side to move, all stones, number of stones) after ``moves``."""
    stones = [0, 0]
    mask = 0
    for i, ch in enumerate(moves):
        bit = drop(mask, int(ch) - 1)
        stones[i % 2] |= bit
        mask |= bit
    return stones[len(moves) % 2], mask, len(moves)


def negamax(cur: int, mask: int, moves: int, alpha: int, beta: int, table: dict) -> int:
    """Value for the side to move (1, 0, -1) within the window (alpha, beta)."""
    if moves == ROWS * COLS:
        return 0
    for c in ORDER:
        if not mask & TOP[c] and connected(cur | drop(mask, c)):
            return 1
    key = cur + mask
    lo, hi = table.get(key, (-1, 1))
    alpha, beta = max(alpha, lo), min(beta, hi)
    if alpha >= beta:
        return alpha
    alpha0, best = alpha, -1
    for c in ORDER:
        if mask & TOP[c]:
            continue
        v = -negamax(cur ^ mask, mask | drop(mask, c), moves + 1, -beta, -alpha, table)
        best = max(best, v)
        alpha = max(alpha, v)
        if alpha >= beta:
            break
    if best <= alpha0:
        table[key] = (lo, best)  # an upper bound
    elif best >= beta:
        table[key] = (best, hi)  # a lower bound
    else:
        table[key] = (best, best)
    return best


def move_values(moves: str) -> list[int | None]:
    """The value of each column for the side to move after ``moves`` (None where the column is full)."""
    cur, mask, n = position(moves)
    table: dict = {}
    out: list[int | None] = []
    for c in range(COLS):
        if mask & TOP[c]:
            out.append(None)
        elif connected(cur | drop(mask, c)):
            out.append(1)
        else:
            out.append(-negamax(cur ^ mask, mask | drop(mask, c), n + 1, -1, 1, table))
    return out


def random_endgame(rng: random.Random, stones: int) -> str | None:
    """A random game of ``stones`` moves that nobody has won, or None if the random play ended first."""
    mask, cur, moves = 0, 0, ""
    for _ in range(stones):
        legal = [c for c in range(COLS) if not mask & TOP[c]]
        c = rng.choice(legal)
        bit = drop(mask, c)
        if connected(cur | bit):
            return None
        cur, mask, moves = cur ^ mask, mask | bit, moves + str(c + 1)  # the next mover's stones
    return moves


def generate(count: int, seed: int = 0, stones=(16, 30)) -> list[str]:
    """``count`` lines of the position set: random endgames whose moves do not all have one value."""
    rng = random.Random(seed)
    lines = []
    while len(lines) < count:
        moves = random_endgame(rng, rng.randint(*stones))
        if moves is None:
            continue
        values = move_values(moves)
        if len({v for v in values if v is not None}) < 2:
            continue  # every move equal: the position tells good play from bad in no way
        lines.append(moves + " " + " ".join("x" if v is None else str(v) for v in values))
    return lines


if __name__ == "__main__":
    out = sys.argv[1]
    with open(out, "w") as f:
        f.write("\n".join(generate(int(sys.argv[2]) if len(sys.argv) > 2 else 200)) + "\n")
