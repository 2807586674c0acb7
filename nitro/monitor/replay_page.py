"""``nitro replay FILE --html OUT.html``: a replay as one self-contained web page.

The page holds three.js (bundled in ``viewer/``, MIT), the viewer script, the arena drawn from the
real collision meshes and the replay's arrays (base64), so it opens from disk with no network.
"""

from __future__ import annotations

import base64
import json
import re
from importlib import resources
from pathlib import Path

import numpy as np

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.cmf import find_soccar_meshes, read_cmf
from nitro.monitor.replay import CAR_FLAGS, Replay

# Display-only sizes (RLBot's field description): the goal mouth drawn at each end of the field.
GOAL_HALF_WIDTH = 893.0
GOAL_HEIGHT = 642.775
FIELD_CORNER = 8064.0  # the field's corners are cut at |x| + |y| = 8064

_DTYPE_CODES = {np.dtype(np.float32): "f4", np.dtype(np.float64): "f8", np.dtype(np.int8): "i1",
                np.dtype(np.uint8): "u1", np.dtype(np.uint16): "u2", np.dtype(np.int16): "i2"}


def _array(a: np.ndarray) -> dict:
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    elif a.dtype == np.int64:
        a = a.astype(np.float64)  # exact below 2^53; JavaScript numbers are float64
    a = np.ascontiguousarray(a)
    return {"dtype": _DTYPE_CODES[a.dtype], "shape": list(a.shape),
            "b64": base64.b64encode(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()).decode()}


def arena_geometry(meshes: str | Path | None = None) -> dict:
    """The 16 soccar collision meshes as one indexed triangle list (vertices rounded to whole UU)."""
    folder = find_soccar_meshes(meshes)
    verts, tris, base = [], [], 0
    for path in sorted(folder.glob("mesh_*.cmf"), key=lambda p: int(p.stem.split("_")[1])):
        v, i = read_cmf(path)
        verts.append(np.rint(v.astype(np.float64) * C.BT_TO_UU).astype(np.int16))
        tris.append(i + base)
        base += len(v)
    return {"vertices": _array(np.concatenate(verts)), "indices": _array(np.concatenate(tris).astype(np.uint16)
                                                                         if base < 65536 else np.concatenate(tris))}


def _asset(name: str) -> str:
    return (resources.files("nitro.monitor") / "viewer" / name).read_text(encoding="utf-8")


def render(replay: Replay, title: str = "nitro replay", meshes: str | Path | None = None) -> str:
    """The HTML text of a page showing ``replay``."""
    arrays = {name: _array(getattr(replay, name)) for name in (
        "tick", "episode_start", "ball_pos", "car_pos", "car_quat", "car_boost", "car_flags", "pad_active",
        "goal")}
    data = {
        "title": title,
        "meta": {**replay.meta, "car_flags": list(CAR_FLAGS)},
        "arrays": arrays,
        "arena": arena_geometry(meshes),
        "ball_radius": C.BALL_COLLISION_RADIUS_SOCCAR,
        "field": {"x": C.ARENA_EXTENT_X, "y": C.ARENA_EXTENT_Y, "corner": FIELD_CORNER},
        "goal": {"half_width": GOAL_HALF_WIDTH, "height": GOAL_HEIGHT},
    }
    parts = {
        "TITLE": _html_escape(title),
        "THREE": _asset("three.min.js"),
        "THREE_VERSION": _asset("three.VERSION").strip(),
        "THREE_LICENSE": _asset("three.LICENSE").replace("--", "- -"),
        "DATA": json.dumps(data, separators=(",", ":")).replace("</", "<\\/"),
        "VIEWER": _asset("viewer.js"),
    }
    return re.sub(r"\{\{([A-Z_]+)\}\}", lambda m: parts[m.group(1)], _asset("page.html"))


def write(replay: Replay, out: str | Path, title: str | None = None, meshes: str | Path | None = None) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(replay, title or out.stem, meshes), encoding="utf-8")
    return out


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
