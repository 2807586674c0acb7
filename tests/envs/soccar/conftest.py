"""Fixtures of the soccar tests: the real arena mesh, loaded once, and single-threaded CPU runs."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar.arena_mesh import MeshesNotFoundError, load_arena_mesh


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: the tensors here are small, and when other processes share the cores,
    OpenMP's spinning threads slow small ops down by 10-100x."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def mesh():
    """The real soccar arena (16 .cmf files from rlgym-rocket-league) on the CPU."""
    try:
        return load_arena_mesh()
    except MeshesNotFoundError as error:  # the soccar extra is not installed
        pytest.skip(str(error))
