"""A PPO iteration of the Skull King presets (both rollout layouts) makes no host traffic (tests/host_traffic.py): the CPU
stand-in for the GPU checks (set_sync_debug_mode("error") around an iteration, CUDA graph capture of one)
that tests/test_cuda_paths.py and bench/skullking_gpu.py run on a GPU."""

from __future__ import annotations

import pytest
from train_helpers import tiny_config

from nitro.train.ppo import Trainer
from tests.host_traffic import HostTraffic


@pytest.mark.parametrize("preset,decisions", [("skullking", True), ("skullking_hierarchical", True),
                                               ("skullking", False)])
def test_iteration_makes_no_host_traffic(preset, decisions):
    """The presets' decision layout (ppo.decisions: packing into slots by per-seat counters) and the row
    layout."""
    trainer = Trainer(tiny_config(preset, "ppo.num_steps=8", f"ppo.decisions={decisions}"))
    trainer.iteration()  # the first iteration makes the per-device tables (a graph's warm-up does too)
    with HostTraffic() as traffic:
        trainer.iteration()
    assert not traffic.found, traffic.report()
