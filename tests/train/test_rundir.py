"""Run directories never mix two runs: each new run gets a directory of its own (also when runs start in
the same second, in parallel), a run name that holds a run is refused, and the process that trains a
run holds its lock, so resuming a run that still runs (or pointing a new run at it) is refused with
the holder named."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
from train_helpers import tiny_config

from nitro.cli import main
from nitro.train import rundir
from nitro.train.ppo import Trainer, run_dir_for


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir.time, "strftime", lambda fmt: "20260101-120000")  # one second for all
    made: list = []
    start = threading.Barrier(8)

    def new():
        start.wait()
        made.append(rundir.new_run_dir(tmp_path, "", "CartPole-v1"))

    threads = [threading.Thread(target=new) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = sorted(p.name for p in made)
    assert len(set(names)) == 8, names
    assert names[0] == "cartpole-v1-20260101-120000"
    assert set(names[1:]) == {f"cartpole-v1-20260101-120000-{k}" for k in range(2, 9)}


def test_two_trainers_of_the_same_second_keep_their_own_files(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir.time, "strftime", lambda fmt: "20260101-120000")
    runs = []
    for seed in (1, 2):
        cfg = tiny_config("cartpole", f"run.seed={seed}", f"run.dir={tmp_path}", "ppo.total_steps=256")
        trainer = Trainer(cfg, run_dir_for(cfg))
        trainer.train()
        runs.append(trainer.run_dir)
    assert runs[0] != runs[1]
    for seed, run in zip((1, 2), runs):
        assert f"seed: {seed}" in (run / "config.yaml").read_text()
        assert len((run / "metrics.jsonl").read_text().splitlines()) == 2  # its own 2 updates only


def test_a_run_name_that_holds_a_run_is_refused(tmp_path, capsys):
    args = ["train", "cartpole", f"run.dir={tmp_path}", "run.name=mine", "run.console=false",
            "run.tensorboard=false", "env.num_envs=8", "ppo.num_steps=16", "ppo.minibatches=2",
            "ppo.total_steps=128", "run.device=cpu"]
    assert main(args) == 0
    before = (tmp_path / "mine" / "metrics.jsonl").read_text()
    assert main([*args, "run.seed=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / 'mine'} already holds a run; choose another run.name, or continue "
                   f"that run with: nitro train --resume {tmp_path / 'mine'}"]
    assert (tmp_path / "mine" / "metrics.jsonl").read_text() == before  # untouched


def test_a_directory_that_holds_a_run_is_refused_to_a_new_trainer(tmp_path):
    Trainer(tiny_config("cartpole", "ppo.total_steps=128"), tmp_path).train()
    with pytest.raises(rundir.RunDirError, match="already holds a run; .* nitro train --resume"):
        Trainer(tiny_config("cartpole", "ppo.total_steps=128"), tmp_path)


HOLDER = textwrap.dedent("""
    import sys, time
    from nitro.train.rundir import RunLock
    lock = RunLock(sys.argv[1]).acquire()  # held while the object lives
    print("locked", flush=True)
    time.sleep(120)
""")


def test_a_run_that_is_still_running_cannot_be_resumed(tmp_path):
    cfg = tiny_config("cartpole", "ppo.total_steps=256", "run.checkpoint_every=1")
    Trainer(cfg, tmp_path).train()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(rundir.RunDirError) as err:
            Trainer(tiny_config("cartpole", "ppo.total_steps=512"), tmp_path, resume=tmp_path)
        assert f"{tmp_path} is in use by process {holder.pid} on " in str(err.value)
        assert "wait for it to finish or stop it" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    # a killed holder leaves no stale lock: the operating system released it
    resumed = Trainer(tiny_config("cartpole", "ppo.total_steps=512"), tmp_path, resume=tmp_path)
    assert resumed.update == 2
    resumed.train()
    assert resumed.update == 4


def test_the_lock_is_held_while_training_and_released_after(tmp_path):
    trainer = Trainer(tiny_config("cartpole", "ppo.total_steps=256"), tmp_path)
    seen = []

    def try_lock(m):
        try:
            rundir.RunLock(tmp_path).acquire()
        except rundir.RunDirError:
            seen.append("refused")
        else:
            seen.append("acquired")

    trainer.train(on_log=try_lock)
    assert seen == ["refused", "refused"]
    rundir.RunLock(tmp_path).acquire().release()  # free once train() returned
