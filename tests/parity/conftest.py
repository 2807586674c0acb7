"""Fixtures of the parity tests: single-threaded CPU runs, and the oracle (skipped when absent)."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar.mesh import MeshesNotFoundError, load_arena_mesh


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: the tensors here are small, and when other processes share the cores,
    OpenMP's spinning threads slow small ops down by 10-100x."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def oracle():
    """The real RocketSim (rocketsim==2.2.1), initialised on the real soccar meshes."""
    pytest.importorskip("RocketSim", reason='the oracle is missing: pip install "nitro-rl[soccar]"')
    try:
        load_arena_mesh()
    except MeshesNotFoundError as error:
        pytest.skip(str(error))
    from . import rocketsim_harness

    return rocketsim_harness.rocketsim()
