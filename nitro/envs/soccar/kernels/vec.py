"""Vector helpers of the kernels: 3-vectors are (x, y, z) tuples of [BLOCK] tensors (one lane = one
env) or of scalars. Each does its float operations in the order `vec.py` (the reference) does,
component by component."""

from __future__ import annotations

import torch

from nitro.envs.soccar.kernels import constexpr, jit, tl


@jit
def add(a, b):
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


@jit
def sub(a, b):
    return a[0] - b[0], a[1] - b[1], a[2] - b[2]


@jit
def scale(a, s):
    return a[0] * s, a[1] * s, a[2] * s


@jit
def neg(a):
    return -a[0], -a[1], -a[2]


@jit
def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def cross(a, b):
    return a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]


@jit
def where(c, a, b):
    return tl.where(c, a[0], b[0]), tl.where(c, a[1], b[1]), tl.where(c, a[2], b[2])


@jit
def pick(values, index, N: tl.constexpr):
    """values[index] for a per-lane index, over a static tuple of N per-lane values."""
    out = values[0]
    for j in tl.static_range(1, N):
        out = tl.where(index == j, values[j], out)
    return out


@jit
def pick3(vectors, index, N: tl.constexpr):
    """`pick` over a static tuple of N vectors."""
    out = vectors[0]
    for j in tl.static_range(1, N):
        out = where(index == j, vectors[j], out)
    return out


@jit
def put(values, index, value, on, N: tl.constexpr):
    """``values`` (a static tuple of N per-lane values) with entry ``index`` (per lane) replaced by
    ``value`` where ``on``."""
    out = ()
    for j in tl.static_range(N):
        out = out + (tl.where(on & (index == j), value, values[j]),)
    return out


@jit
def put3(vectors, index, value, on, N: tl.constexpr):
    """`put` over a static tuple of N vectors."""
    out = ()
    for j in tl.static_range(N):
        out = out + (where(on & (index == j), value, vectors[j]),)
    return out


@jit
def rotate(v, axis, angle):
    """Rotate v about ``axis`` (any length) by angle, right-handed (Rodrigues, as btQuaternion)."""
    k = scale(axis, 1.0 / tl.sqrt(dot(axis, axis)))
    c = tl.cos(angle)
    s = tl.sin(angle)
    kv = dot(k, v) * (1 - c)
    return add(add(scale(v, c), scale(cross(k, v), s)), scale(k, kv))


@jit
def atan2(y, x):
    """atan2 from Cephes atanf (|error| ~1e-7 rad): libdevice's is missing in the interpreter."""
    ax = tl.abs(x)
    ay = tl.abs(y)
    big = tl.maximum(ax, ay)
    small = tl.minimum(ax, ay)
    t = small / tl.where(big > 0, big, 1.0)
    hi = t > 0.4142135623730950  # tan(pi / 8)
    z = tl.where(hi, (t - 1.0) / (t + 1.0), t)
    base = tl.where(hi, 0.7853981633974483, 0.0)
    zz = z * z
    r = base + (
        (((8.05374449538e-2 * zz - 1.38776856032e-1) * zz + 1.99777106478e-1) * zz - 3.33329491539e-1)
        * zz
        * z
        + z
    )
    r = tl.where(ay > ax, 1.5707963267948966 - r, r)
    r = tl.where(x < 0, 3.141592653589793 - r, r)
    return tl.where(y < 0, -r, r)


@jit
def load(ptr, mask, other):
    """ptr[0], ptr[1], ptr[2] per lane; ``other``: the value of each component where masked."""
    return (
        tl.load(ptr, mask=mask, other=other[0]),
        tl.load(ptr + 1, mask=mask, other=other[1]),
        tl.load(ptr + 2, mask=mask, other=other[2]),
    )


@jit
def load_uniform(ptr):
    """ptr[0], ptr[1], ptr[2]: one 3-vector for every lane (as the plane normals)."""
    return tl.load(ptr), tl.load(ptr + 1), tl.load(ptr + 2)


@jit
def store(ptr, v, mask):
    tl.store(ptr, v[0], mask=mask)
    tl.store(ptr + 1, v[1], mask=mask)
    tl.store(ptr + 2, v[2], mask=mask)


# --- Rows of W floats per lane, read and written with one memory operation --------------------------
# (A kernel holding many per-lane values pays for each memory operation in compile time: Triton's
# coalescing pass walks the whole kernel once per operation. A [BLOCK, W] tile is one operation, split
# into its W columns in registers.)


@jit
def columns(tile, W: tl.constexpr, BLOCK: tl.constexpr):
    """The W columns of a [BLOCK, W] tile (W a power of two) as a tuple of [BLOCK] tensors."""
    if W == 1:
        return (tl.reshape(tile, (BLOCK,)),)
    else:
        even, odd = tl.split(tl.reshape(tile, (BLOCK, W // 2, 2)))
        even = columns(even, W // 2, BLOCK)
        odd = columns(odd, W // 2, BLOCK)
        out = ()
        for i in tl.static_range(W // 2):
            out = out + (even[i], odd[i])
        return out


@jit
def tile_of(values, W: tl.constexpr, BLOCK: tl.constexpr):
    """`columns`' inverse: a tuple of W [BLOCK] float tensors as a [BLOCK, W] tile."""
    if W == 1:
        return tl.reshape(values[0], (BLOCK, 1))
    else:
        even = ()
        odd = ()
        for i in tl.static_range(W // 2):
            even = even + (values[2 * i],)
            odd = odd + (values[2 * i + 1],)
        return tl.reshape(tl.join(tile_of(even, W // 2, BLOCK), tile_of(odd, W // 2, BLOCK)), (BLOCK, W))


@jit
def load_row(ptr, row, live, W: tl.constexpr, BLOCK: tl.constexpr):
    """Row ``row`` of a [rows, W] array per lane, as a tuple of W values (0 where not live; W a power of
    two)."""
    return load_columns(ptr, row, live, W, W, W, BLOCK)


@jit
def store_row(ptr, row, values, live, W: tl.constexpr, BLOCK: tl.constexpr):
    """`load_row`'s inverse: W per-lane values into row ``row``."""
    store_columns(ptr, row, values, live, W, W, W, BLOCK)


@jit
def load_columns(ptr, row, live, STRIDE: tl.constexpr, COUNT: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr):
    """The first COUNT columns of row ``row`` of a [rows, STRIDE] array per lane: a tuple of COUNT values (0
    where not live). Reads a prefix of a wider row, or a row narrower than a power of two: as one [BLOCK,
    W] tile (W a power of two >= COUNT, the columns beyond COUNT masked off), or, beyond `WIDE` columns,
    16 bytes per lane at a time."""
    PIECE: tl.constexpr = W if COUNT <= WIDE else 128 // ptr.dtype.element_ty.primitive_bitwidth  # `WIDE`
    out = ()
    for c in tl.static_range(0, COUNT, PIECE):
        at = c + tl.arange(0, PIECE)
        tile = tl.load(ptr + row[:, None] * STRIDE + at[None, :], mask=live[:, None] & (at < COUNT)[None, :], other=0)
        values = columns(tile, PIECE, BLOCK)
        for k in tl.static_range(PIECE):
            if c + k < COUNT:
                out = out + (values[k],)
    return out


@jit
def store_columns(
    ptr, row, values, live, STRIDE: tl.constexpr, COUNT: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr
):
    """`load_columns`' inverse: COUNT per-lane values into the first COUNT columns of row ``row`` of a
    [rows, STRIDE] array, written as `load_columns` reads them (the columns beyond COUNT masked off)."""
    PIECE: tl.constexpr = W if COUNT <= WIDE else 128 // ptr.dtype.element_ty.primitive_bitwidth  # `WIDE`
    padded = values
    for _ in tl.static_range((COUNT + PIECE - 1) // PIECE * PIECE - COUNT):
        padded = padded + (values[0] * 0,)
    for c in tl.static_range(0, COUNT, PIECE):
        at = c + tl.arange(0, PIECE)
        part = ()
        for k in tl.static_range(PIECE):
            part = part + (padded[c + k],)
        tl.store(ptr + row[:, None] * STRIDE + at[None, :], tile_of(part, PIECE, BLOCK), mask=live[:, None] & (at < COUNT)[None, :])


WIDE = constexpr(16)
"""Rows of more columns than this are read and written 16 bytes per lane at a time (`load_columns`): a
[BLOCK, W] tile is read one row across the warp's threads, and its columns reach their lanes through
shared memory, which for a whole car row (88 columns) costs more registers and time than the extra
memory operations (measured on an H200: the 1v0 pre-tick 1.86 -> 1.12 ms per tick at 1M envs, its stack
1,376 -> 136 B per thread). Narrower rows stay one tile: more memory operations cost Triton's compile
time, and the env kernels that read parts of several cars' rows ran slower in pieces."""


# --- Chunked rows: a [envs * PER, W] array (row env * PER + k) stored in groups of row k of 32 neighbouring
# envs, each group's 16-byte chunks side by side ---
# (Rows read one per lane, 16 bytes at a time, touch half of a 32-byte memory sector per lane and
# access: the lanes of a warp that take row k of 32 neighbouring envs read chunk j of their rows as 512
# bytes in a row, whole sectors. Lanes that take scattered rows read them as before: 16 bytes per lane
# and access.)
ENVS_PER_GROUP = constexpr(32)
"""Envs per group of a chunked array (`chunked_at`): a warp's lanes."""
CHUNK = constexpr(4)
"""Floats per chunk: 16 bytes, one lane's widest memory access."""


@jit
def chunked_at(ptr, row, W: tl.constexpr, PER: tl.constexpr, COLUMN: tl.constexpr):
    """Where column COLUMN of row ``row`` (= env * PER + k) of a chunked [envs * PER, W] float array lies
    (W a multiple of `CHUNK`): group (env // 32) * PER + k of 32 rows, W * 32 floats, holds chunk j
    (columns 4j to 4j + 3) of its rows side by side at j * 128 + (env % 32) * 4."""
    row = row.to(tl.int32)  # (the array's offsets fit 32 bits: `kernels/arena.check_offsets`)
    env = row // PER
    group = env // ENVS_PER_GROUP
    chunk = COLUMN // CHUNK  # (and COLUMN - chunk * CHUNK its place in the chunk)
    at = (group * PER + (row - env * PER)) * (ENVS_PER_GROUP * W) + (env - group * ENVS_PER_GROUP) * CHUNK
    return ptr + at + (chunk * (ENVS_PER_GROUP * CHUNK) + (COLUMN - chunk * CHUNK))


@jit
def chunked_row(place, PER: tl.constexpr):
    """The row (env * PER + k) at place ``place`` of a chunked array's order: `chunked_at`'s groups in
    turn, 32 places each, so that 32 neighbouring places take row k of 32 neighbouring envs."""
    group = place // ENVS_PER_GROUP
    env = (group // PER) * ENVS_PER_GROUP + (place - group * ENVS_PER_GROUP)
    return env * PER + (group - (group // PER) * PER)


@jit
def load_chunked(ptr, row, live, W: tl.constexpr, PER: tl.constexpr, FIRST: tl.constexpr, COUNT: tl.constexpr,
                 BLOCK: tl.constexpr):  # fmt: skip
    """Columns FIRST to FIRST + COUNT - 1 of row ``row`` of a chunked [envs * PER, W] array per lane, as
    a tuple of COUNT values (0 where not live): the chunks that hold them, one memory operation each."""
    base = chunked_at(ptr, row, W, PER, 0)
    out = ()
    for j in tl.static_range(FIRST // CHUNK, (FIRST + COUNT + CHUNK - 1) // CHUNK):
        at = tl.arange(0, CHUNK)
        tile = tl.load(base[:, None] + (j * ENVS_PER_GROUP * CHUNK) + at[None, :], mask=live[:, None], other=0)
        values = columns(tile, CHUNK, BLOCK)
        for k in tl.static_range(CHUNK):
            if j * CHUNK + k >= FIRST and j * CHUNK + k < FIRST + COUNT:
                out = out + (values[k],)
    return out


@jit
def store_chunked(ptr, row, values, live, W: tl.constexpr, PER: tl.constexpr, FIRST: tl.constexpr,
                  COUNT: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """`load_chunked`'s inverse: COUNT per-lane values into columns FIRST on of row ``row`` (the other
    columns of a chunk it shares masked off)."""
    base = chunked_at(ptr, row, W, PER, 0)
    for j in tl.static_range(FIRST // CHUNK, (FIRST + COUNT + CHUNK - 1) // CHUNK):
        at = tl.arange(0, CHUNK)
        part = ()
        for k in tl.static_range(CHUNK):
            if j * CHUNK + k >= FIRST and j * CHUNK + k < FIRST + COUNT:
                part = part + (values[j * CHUNK + k - FIRST],)
            else:
                part = part + (values[0] * 0,)
        mask = live[:, None]
        if j * CHUNK < FIRST:
            mask = mask & (at + j * CHUNK >= FIRST)[None, :]
        if (j + 1) * CHUNK > FIRST + COUNT:
            mask = mask & (at + j * CHUNK < FIRST + COUNT)[None, :]
        tl.store(base[:, None] + (j * ENVS_PER_GROUP * CHUNK) + at[None, :], tile_of(part, CHUNK, BLOCK), mask=mask)


@jit
def store_chunks(ptr, row, values, live, W: tl.constexpr, PER: tl.constexpr, CHUNKS: tl.constexpr,
                 BLOCK: tl.constexpr):  # fmt: skip
    """The chunks of row ``row`` of a chunked [envs * PER, W] array whose bits are set in CHUNKS (bit j:
    columns 4j to 4j + 3) from the whole row's W per-lane values, one memory operation each; the row's
    other chunks are left as they are (and values only they would take need not be loaded)."""
    base = chunked_at(ptr, row, W, PER, 0)
    for j in tl.static_range(W // CHUNK):
        if (CHUNKS >> j) & 1:
            part = ()
            for k in tl.static_range(CHUNK):
                part = part + (values[j * CHUNK + k],)
            at = tl.arange(0, CHUNK)
            tl.store(base[:, None] + (j * ENVS_PER_GROUP * CHUNK) + at[None, :], tile_of(part, CHUNK, BLOCK),
                     mask=live[:, None])  # fmt: skip


def chunk_rows(rows: torch.Tensor, per: int) -> torch.Tensor:
    """A [envs * per, W] float tensor (row env * per + k) as a chunked array (`chunked_at`):
    [chunked_rows(envs, per), W], the rows of envs past the last zero."""
    envs, width = rows.shape[0] // per, rows.shape[1]
    groups = -(-envs // ENVS_PER_GROUP.value)
    padded = torch.zeros(groups * ENVS_PER_GROUP.value, per, width, dtype=rows.dtype, device=rows.device)
    padded[:envs] = rows.reshape(envs, per, width)
    by_chunk = padded.reshape(groups, ENVS_PER_GROUP.value, per, width // CHUNK.value, CHUNK.value)
    return by_chunk.permute(0, 2, 3, 1, 4).contiguous().reshape(-1, width)


def unchunk_rows(chunked: torch.Tensor, envs: int, per: int) -> torch.Tensor:
    """`chunk_rows`' inverse: the rows of the first ``envs`` envs, [envs * per, W]."""
    width = chunked.shape[1]
    by_chunk = chunked.reshape(-1, per, width // CHUNK.value, ENVS_PER_GROUP.value, CHUNK.value)
    return by_chunk.permute(0, 3, 1, 2, 4).reshape(-1, width)[: envs * per]


def chunked_rows(envs: int, per: int) -> int:
    """Rows a chunked array of ``per`` rows for each of ``envs`` envs takes: whole groups."""
    return -(-envs // ENVS_PER_GROUP.value) * ENVS_PER_GROUP.value * per
