"""Checkpoint files: written durably (the temporary file flushed to disk before the rename, the folder
after it), never read half-written, and a resume that falls back from unreadable newest files to the
newest readable one, naming what it skipped; stale temporaries of a killed writer are removed."""

from __future__ import annotations

import json
import os

import pytest
import torch
from train_helpers import tiny_config

from nitro.cli import main
from nitro.train import checkpoint
from nitro.train.ppo import Trainer, auto_threads


def test_a_write_is_flushed_renamed_then_its_folder_flushed(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def replace(src, dst):
        calls.append(("rename", os.path.basename(src), os.path.basename(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "fsync", fsync)
    monkeypatch.setattr(checkpoint.os, "replace", replace)
    path = tmp_path / "checkpoints" / "ckpt_00000001.safetensors"
    checkpoint.save(path, {"w": torch.arange(4.0)}, {"update": 1})
    assert calls == [("fsync", "ckpt_00000001.safetensors.tmp"),
                     ("rename", "ckpt_00000001.safetensors.tmp", "ckpt_00000001.safetensors"),
                     ("fsync", "checkpoints")]
    tensors, meta = checkpoint.load(path)
    assert torch.equal(tensors["w"], torch.arange(4.0)) and meta == {"update": 1}


@pytest.mark.parametrize("damage", ["empty", "truncated", "header only", "not a checkpoint"])
def test_an_unreadable_file_is_a_one_line_error_naming_it(tmp_path, damage):
    path = tmp_path / "ckpt_00000001.safetensors"
    checkpoint.save(path, {"w": torch.zeros(1000)}, {"update": 1})
    data = path.read_bytes()
    header = 8 + int.from_bytes(data[:8], "little")
    path.write_bytes({"empty": b"", "truncated": data[: len(data) // 2], "header only": data[:header],
                      "not a checkpoint": b"{}" * 40}[damage])
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.load(path)
    msg = str(err.value)
    assert msg.startswith(f"checkpoint {path} cannot be read (") and "\n" not in msg
    assert msg.endswith(f"; {path.stat().st_size} bytes on disk)")
    if damage in ("empty", "not a checkpoint"):  # the others keep the header, which holds the metadata
        with pytest.raises(checkpoint.CheckpointError):
            checkpoint.load_meta(path)


def _run_with_checkpoints(tmp_path, updates: int):
    cfg = tiny_config("cartpole", f"ppo.total_steps={updates * 128}", "run.checkpoint_every=1",
                      f"run.keep_last={updates}")
    trainer = Trainer(cfg, tmp_path)
    trainer.train()
    return trainer


def test_resume_falls_back_to_the_newest_readable_checkpoint(tmp_path, capsys):
    _run_with_checkpoints(tmp_path, 4)
    names = [p.name for p in checkpoint.checkpoints(tmp_path)]
    assert names == [f"ckpt_{u:08d}.safetensors" for u in (1, 2, 3, 4)]
    newest, second = checkpoint.checkpoints(tmp_path)[-1], checkpoint.checkpoints(tmp_path)[-2]
    newest.write_bytes(newest.read_bytes()[:100])  # a full disk cut it short
    second.write_bytes(b"")
    good_tensors, _ = checkpoint.load(checkpoint.checkpoints(tmp_path)[-3])

    resumed = Trainer(tiny_config("cartpole", "ppo.total_steps=768", "run.checkpoint_every=1"), tmp_path,
                      resume=tmp_path)
    assert resumed.update == 2 and resumed.global_step == 256
    live = resumed._state_tensors()
    assert all(torch.equal(live[k], good_tensors[k]) for k in live)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"nitro: skipped unreadable checkpoint {newest} (truncated")
    assert err[0].endswith(f"renamed to {newest.name}.unreadable")
    assert err[1].startswith(f"nitro: skipped unreadable checkpoint {second} (empty or truncated; 0 bytes")
    assert err[2] == f"nitro: resuming from {tmp_path / 'checkpoints' / 'ckpt_00000002.safetensors'} (update 2)"
    # the unreadable files are out of the list, so rotation never keeps them instead of good ones
    assert [p.name for p in checkpoint.checkpoints(tmp_path)] == ["ckpt_00000001.safetensors",
                                                                  "ckpt_00000002.safetensors"]
    resumed.train()
    assert resumed.update == 6
    assert checkpoint.load_meta(checkpoint.latest(tmp_path))["update"] == 6


def test_no_readable_checkpoint_is_one_line_naming_each_file(tmp_path, capsys):
    _run_with_checkpoints(tmp_path, 2)
    for p in checkpoint.checkpoints(tmp_path):
        p.write_bytes(b"\x00" * 3)
    assert main(["train", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: no readable checkpoint in {tmp_path / 'checkpoints'}: ")
    assert "ckpt_00000001.safetensors: empty or truncated; 3 bytes on disk" in err[0]
    assert "ckpt_00000002.safetensors: empty or truncated; 3 bytes on disk" in err[0]


def test_eval_of_a_corrupt_checkpoint_names_the_file(tmp_path, capsys):
    _run_with_checkpoints(tmp_path, 1)
    path = checkpoint.latest(tmp_path)
    path.write_bytes(path.read_bytes()[:50])
    assert main(["eval", str(tmp_path), "--checkpoint", "latest", "--device", "cpu", "--episodes", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    needs = 8 + int.from_bytes(path.read_bytes()[:8], "little")
    assert err == [f"error: checkpoint {path} cannot be read (truncated: the header alone needs {needs} bytes; "
                   f"50 bytes on disk)"]


def test_stale_temporaries_of_a_killed_writer_are_removed(tmp_path):
    _run_with_checkpoints(tmp_path, 1)
    stale = tmp_path / "checkpoints" / "ckpt_00000002.safetensors.tmp"
    stale.write_bytes(b"half a checkpoint")
    resumed = Trainer(tiny_config("cartpole", "ppo.total_steps=256", "run.checkpoint_every=1"), tmp_path,
                      resume=tmp_path)
    assert not stale.exists()
    assert resumed.update == 1


def test_the_checkpoint_records_the_thread_count_and_the_config(tmp_path):
    trainer = _run_with_checkpoints(tmp_path, 1)
    meta = checkpoint.load_meta(checkpoint.latest(tmp_path))
    assert meta["threads"] == torch.get_num_threads() == 1  # the tests run single-threaded
    assert meta["config"]["run"]["threads"] == 1
    assert json.loads(json.dumps(meta["config"])) == meta["config"]
    assert trainer.cfg.run.threads == 1


def test_run_threads_zero_picks_one_cpu_thread_per_4096_envs():
    default = torch.get_num_threads()
    cpu = torch.device("cpu")
    assert auto_threads(256, cpu) == 1  # the CartPole preset
    assert auto_threads(4096 * 64, cpu) == default  # never more than PyTorch's default
    assert auto_threads(8192, cpu) == min(2, default)
    assert auto_threads(256, torch.device("meta")) == default  # accelerators keep PyTorch's default
    trainer = Trainer(tiny_config("cartpole", "run.threads=0"))
    assert trainer.cfg.run.threads == torch.get_num_threads() == 1
