"""nitro doctor: its measurements on this machine (small sizes), the suggestion rule, the output."""

from __future__ import annotations

import json

import pytest

from nitro.cli import main
from nitro.monitor import doctor


def test_suggestion_is_the_knee():
    rates = [{"num_envs": 64, "steps_per_s": 1000.0}, {"num_envs": 256, "steps_per_s": 3500.0},
             {"num_envs": 1024, "steps_per_s": 4100.0}, {"num_envs": 4096, "steps_per_s": 4300.0},
             {"num_envs": 16384, "error": "out of memory"}]
    got = doctor.suggest(rates)
    # the best is 4300; 80% of it is 3440: 256 envs reach 3500, the smallest that does
    assert got["num_envs"] == 256 and got["best_steps_per_s"] == 4300.0
    assert doctor.suggest([{"num_envs": 8, "error": "out of memory"}]) == {}


def test_doctor_json_on_this_machine(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(doctor.SIZES, "cpu", (16, 32))
    monkeypatch.setitem(doctor.ENV_SIZE, "cpu", 64)
    assert main(["doctor", "--device", "cpu", "--json", "--quick", "--out", str(tmp_path / "d.json")]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert json.loads((tmp_path / "d.json").read_text()) == report
    assert "measuring: PPO iteration at 32 envs" in err
    m = report["machine"]
    assert m["cpu_cores"] >= m["cpu_cores_usable"] >= 1 and m["ram_gb"] > 0 and "gpu" not in m
    assert report["versions"]["torch"].split("+")[0] == __import__("torch").__version__.split("+")[0]
    assert report["soccar"]["kernels"].startswith("not on CPU")
    (env,) = report["env_steps"]
    assert env["mode"] == "eager" and env["num_envs"] == 64 and env["steps_per_s"] > 0
    assert report["inference"]["samples_per_s"] == pytest.approx(64 / report["inference"]["seconds"])
    assert [r["num_envs"] for r in report["ppo"]] == [16, 32]
    for r in report["ppo"]:
        assert r["steps_per_s"] == pytest.approx(r["num_envs"] * r["num_steps"] / r["update_seconds"])
        assert r["collect_seconds"] > 0 and r["learn_seconds"] > 0 and not r["graphed"]
    assert report["suggestion"]["num_envs"] in (16, 32)


def test_doctor_text():
    report = {"preset": "cartpole", "device": "cuda:0", "preset_num_envs": 16384,
              "machine": {"cpu": "Xeon", "cpu_cores": 16, "cpu_cores_usable": 16, "ram_gb": 128.0, "gpu": "NVIDIA H200",
                          "gpu_count": 1, "gpu_capability": "9.0", "gpu_memory_gb": 150.0, "gpu_memory_free_gb": 149.0,
                          "gpu_utilization": 0.0, "driver": "580.1"},
              "versions": {"torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0", "rocketsim": None},
              "soccar": {"meshes": "/m", "kernels": "ok"},
              "env_steps": [{"env": "CartPole-v1", "num_envs": 65536, "mode": "graph", "steps_per_s": 3.0e10}],
              "inference": {"num_envs": 65536, "seconds": 1e-4, "samples_per_s": 6.5e8},
              "ppo": [{"num_envs": 16384, "num_steps": 16, "update_seconds": 2e-3, "steps_per_s": 1.3e8,
                       "collect_seconds": 1e-3, "learn_seconds": 1e-3}, {"num_envs": 262144, "error": "out of memory"}],
              "suggestion": {"num_envs": 16384, "steps_per_s": 1.3e8, "rule": "smallest ..."}}
    text = doctor.text(report).splitlines()
    assert text[1] == "gpu       NVIDIA H200 x1 (sm 9.0, 150 GB, 149 GB free, 0% busy; driver 580.1)"
    assert text[2] == "versions  torch 2.11.0, triton 3.6.0, cuda 13.0"  # missing packages are left out
    assert text[6] == "ppo       16384 envs x 16 steps: 2 ms per update (collect 1 ms, learn 1 ms), 1.300e+08 steps/s"
    assert text[7] == "ppo       262144 envs: out of memory"
    assert text[8].startswith("suggest   env.num_envs=16384 for cartpole on cuda:0")
