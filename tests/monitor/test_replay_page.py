"""The replay page in a real headless browser: it loads from disk, draws the arena, ball, cars and pads,
and its timeline moves them to the recorded states."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from nitro.envs.soccar import Arena
from nitro.envs.soccar.arena_mesh.cmf import read_cmf
from nitro.monitor import replay_page
from nitro.monitor.recorder import ArenaRecording

# Positions cross into JavaScript as float32 and are compared after three.js's float64 arithmetic:
# 1e-3 UU is far below anything visible and far above float32 rounding of values up to ~6000 UU.
ATOL = 1e-3


def open_page(page, replay, tmp_path, name="replay"):
    path = replay_page.write(replay, tmp_path / f"{name}.html")
    page.goto(path.as_uri())
    page.wait_for_function("window.nitroViewerReady === true", timeout=30_000)
    return path


def display(v) -> list[float]:
    """RocketSim (x, y, z) as the page's three.js coordinates (x, z, y)."""
    return [float(v[0]), float(v[2]), float(v[1])]


def ball_at(page, frame: int) -> list[float]:
    return page.evaluate(f"(() => {{ nitroViewer.setFrame({frame}); const p = nitroViewer.objects.ball.position; "
                         f"return [p.x, p.y, p.z]; }})()")


def screenshot(page) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(page.screenshot())).convert("RGB"), np.float32)


def test_cars_replay_page(page, cars_replay, tmp_path, meshes_available):
    open_page(page, cars_replay, tmp_path)
    v = "nitroViewer"
    assert page.evaluate(f"[{v}.numEnvs, {v}.numFrames, {v}.numCars, {v}.objects.pads.length]") == [2, 120, 2, 34]
    # the arena is the real collision mesh: every vertex of the 16 files
    vertices = sum(read_cmf(p)[0].shape[0] for p in meshes_available.glob("mesh_*.cmf"))
    assert page.evaluate(f"{v}.objects.arena.geometry.attributes.position.count") == vertices

    for frame in (0, 47, 100):
        np.testing.assert_allclose(ball_at(page, frame), display(cars_replay.ball_pos[0, frame]), atol=ATOL)
        cars = page.evaluate(f"""{v}.objects.cars.map(c => {{
            const f = new THREE.Vector3(1, 0, 0).applyQuaternion(c.quaternion);  // the box's forward axis
            const u = new THREE.Vector3(0, 1, 0).applyQuaternion(c.quaternion);
            return [[c.position.x, c.position.y, c.position.z], [f.x, f.y, f.z], [u.x, u.y, u.z]]; }})""")
        rot = cars_replay.rot_mat()[0, frame]
        for c, (pos, forward, up) in enumerate(cars):
            np.testing.assert_allclose(pos, display(cars_replay.car_pos[0, frame, c]), atol=ATOL)
            np.testing.assert_allclose(forward, display(rot[c][:, 0]), atol=1e-5)  # unit vectors, float32
            np.testing.assert_allclose(up, display(rot[c][:, 2]), atol=1e-5)

    # car 1 is demolished on frames 80-89; pad 3 is taken on frame 60
    visible = lambda f: page.evaluate(f"(() => {{ {v}.setFrame({f}); return {v}.objects.cars[1].visible; }})()")  # noqa: E731
    assert visible(79) and not visible(85) and visible(90)
    pad_colour = lambda f: page.evaluate(  # noqa: E731
        f"(() => {{ {v}.setFrame({f}); return {v}.objects.pads[3].material.color.getHex(); }})()")
    assert pad_colour(59) != pad_colour(60)
    # one goal marker (blue scored) on the timeline, at the goal frame
    goal = int(np.nonzero(cars_replay.goal[0])[0][0])
    markers = page.evaluate(f"{v}.markers()")
    assert [m["cls"] for m in markers] == ["goal blue"]
    assert float(markers[0]["left"].rstrip("%")) == pytest.approx(100 * goal / 119)
    page.locator("#markers .goal").click()
    assert page.evaluate(f"{v}.frame") == goal

    # the timeline: dragging the slider moves the scene; play advances frames; the score counts the goal
    page.locator("#timeline").fill("30")
    assert page.evaluate(f"{v}.frame") == 30
    before = screenshot(page)
    page.locator("#timeline").fill("119")
    page.evaluate(f"{v}.render()")
    after = screenshot(page)
    assert before.std() > 10, "the page should not be blank"
    assert np.abs(after - before).mean() > 0.5, "the scene should change between frames"
    assert page.locator("#score").inner_text().replace(" ", "") == "1:0"
    page.locator("#timeline").fill("0")
    page.locator("#play").click()
    page.wait_for_function(f"{v}.frame > 3", timeout=10_000)
    page.keyboard.press(" ")
    assert not page.evaluate(f"{v}.playing")
    page.evaluate(f"{v}.setEnv(1)")
    assert page.evaluate(f"{v}.env") == 1


def test_ball_only_arena_page(page, tmp_path, meshes_available):
    arena = Arena(1, blue=0, orange=0)
    arena.set_ball(pos=torch.tensor([[0.0, 0.0, 1200.0]]), vel=torch.tensor([[800.0, 1500.0, 0.0]]))
    rec = ArenaRecording(arena)
    for _ in range(6):
        rec.step(arena.step(None, ticks=4))
    replay = rec.replay()
    open_page(page, replay, tmp_path, "ball")
    assert page.evaluate("nitroViewer.numCars") == 0
    for frame in (0, 6):
        np.testing.assert_allclose(ball_at(page, frame), display(replay.ball_pos[0, frame]), atol=ATOL)
    assert ball_at(page, 6)[0] > ball_at(page, 0)[0] + 50  # it moved
