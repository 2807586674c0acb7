"""Two processes over gloo on CPU: ``torchrun --nproc-per-node=2 -m nitro.cli train cartpole`` completes,
and two Trainers spawned in-process end with bitwise identical parameters and optimizer state (the
gradients are all-reduced) while their envs differ (per-rank seeds)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import torch
import torch.multiprocessing as mp
from train_helpers import tiny_config

from nitro.train import checkpoint

WORLD = 2
UPDATES = 6
N, T = 8, 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "LOCAL_RANK": str(rank), "WORLD_SIZE": str(WORLD)})
    torch.set_num_threads(1)
    from nitro.train import dist
    from nitro.train.ppo import Trainer

    cfg = tiny_config("cartpole", f"ppo.total_steps={UPDATES * N * T * WORLD}", "ppo.obs_norm=true",
                      "ppo.reward_scale=true")
    trainer = Trainer(cfg, f"{out_dir}/run" if rank == 0 else None)
    assert trainer.dist.world_size == WORLD and trainer.num_updates == UPDATES
    metrics = trainer.train()
    state = {k: v.clone() for k, v in trainer._state_tensors().items()}
    torch.save({"state": state, "metrics": metrics, "seed": trainer.seed}, f"{out_dir}/rank{rank}.pt")
    dist.shutdown(trainer.dist)


def test_two_spawned_trainers_stay_in_sync(tmp_path):
    os.makedirs(tmp_path / "run")
    mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD))
    assert r0["seed"] != r1["seed"]
    learner = [k for k in r0["state"] if k.startswith(("policy.", "optim.", "obs_rms.", "ret_rms."))]
    assert "optim.exp_avg" in learner and "obs_rms.mean" in learner
    differ = [k for k in learner if not torch.equal(r0["state"][k], r1["state"][k])]
    assert not differ, f"ranks disagree on {differ}"
    # ...while each rank stepped its own envs (different seeds): their rollout states differ
    carry = [k for k in r0["state"] if k.startswith("carry.")]
    assert any(not torch.equal(r0["state"][k], r1["state"][k]) for k in carry)
    # metrics are reduced over both ranks: every rank reports the same numbers
    for k in ("loss/policy", "loss/value", "episode/count", "global_step"):
        assert r0["metrics"][k] == r1["metrics"][k], k
    assert r0["metrics"]["global_step"] == UPDATES * N * T * WORLD
    # rank 0 alone wrote the run: its checkpoint holds the shared parameters
    tensors, meta = checkpoint.load(checkpoint.latest(tmp_path / "run"))
    assert meta["world_size"] == WORLD and meta["update"] == UPDATES
    assert torch.equal(tensors["optim.exp_avg"], r1["state"]["optim.exp_avg"])


def test_torchrun_two_processes_complete(tmp_path):
    steps = UPDATES * N * T * WORLD
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={WORLD}",
           "--master-addr=127.0.0.1", f"--master-port={_free_port()}", "-m", "nitro.cli", "train", "cartpole",
           "run.device=cpu", "run.console=false", "run.tensorboard=false", f"run.dir={tmp_path}",
           "run.name=ddp", f"env.num_envs={N}", f"ppo.num_steps={T}", "ppo.minibatches=2",
           f"ppo.total_steps={steps}", "ppo.target_return=none"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 1, proc.stdout  # rank 0 alone prints the summary
    assert summaries[0]["global_step"] == steps and summaries[0]["run"] == str(tmp_path / "ddp")
    tensors, meta = checkpoint.load(checkpoint.latest(tmp_path / "ddp"))
    assert meta["world_size"] == WORLD and meta["update"] == UPDATES
    assert all(torch.isfinite(v).all() for k, v in tensors.items() if v.is_floating_point())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ddp"]  # rank 1 made no run directory
