"""Make the pictures of docs/MONITOR.md and the README: a replay page (the real ball-only arena),
the dashboard of a real run, and a learning-curve plot comparing two runs.

    python docs/make_pictures.py [OUT_DIR]     (default docs/images; needs Chromium and the test extra)

Everything is computed here on the CPU: two short CartPole runs, a 2-second ball recording.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nitro.envs.soccar import Arena  # noqa: E402
from nitro.monitor import plot, replay_page  # noqa: E402
from nitro.monitor.dashboard import Dashboard  # noqa: E402
from nitro.monitor.recorder import ArenaRecording  # noqa: E402
from nitro.train import config as C  # noqa: E402
from nitro.train.ppo import Trainer  # noqa: E402

CHROMIUM = next(p for p in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "") if Path(p).exists())


def train(run: Path, lr: str) -> None:
    cfg = C.load("cartpole", ["run.device=cpu", "run.console=false", "run.tensorboard=false", "env.num_envs=64",
                              "ppo.num_steps=32", "ppo.total_steps=150000", "ppo.target_return=none", f"ppo.lr={lr}",
                              f"run.dir={run.parent}", f"run.name={run.name}"])
    Trainer(cfg, run).train()


def ball_replay():
    arena = Arena(1, blue=0, orange=0)
    arena.set_ball(pos=torch.tensor([[-1500.0, 1500.0, 300.0]]), vel=torch.tensor([[900.0, 2600.0, 900.0]]))
    rec = ArenaRecording(arena)
    for _ in range(75):
        rec.step(arena.step(None, ticks=4))
    return rec.replay()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp())
    runs = [work / "cartpole-lr2.5e-3", work / "cartpole-lr3e-4"]
    for run, lr in zip(runs, ("2.5e-3", "3e-4")):
        train(run, lr)
    files = plot.write(runs, work / "plots")
    shutil.copy(files["return_vs_steps"], out / "plot_return.png")

    async def dashboard():
        app = Dashboard(runs[0])
        async with app.run_test(size=(150, 40)) as pilot:
            await pilot.pause(0.5)
            app.save_screenshot(str(work / "monitor.svg"))

    asyncio.run(dashboard())
    svg = work / "monitor.svg"  # no network here: drop the web fonts, the local monospace font stands in
    svg.write_text(re.sub(r"@font-face\s*\{[^}]*\}", "", svg.read_text()))
    page_path = replay_page.write(ball_replay(), work / "replay.html", "ball-only arena: a shot on goal")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--use-angle=swiftshader",
                                                                    "--enable-unsafe-swiftshader"])
        page = browser.new_page(viewport={"width": 1480, "height": 860})
        page.goto((work / "monitor.svg").as_uri())
        page.screenshot(path=str(out / "monitor.png"))
        page.set_viewport_size({"width": 1280, "height": 720})
        page.goto(page_path.as_uri())
        page.wait_for_function("window.nitroViewerReady === true")
        page.evaluate("nitroViewer.setFrame(55); nitroViewer.render()")
        page.screenshot(path=str(out / "replay.png"))
        browser.close()
    print(f"wrote {', '.join(p.name for p in sorted(out.glob('*.png')))} to {out}")


if __name__ == "__main__":
    main()
