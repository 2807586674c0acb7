"""Fixtures of the parity tests: single-threaded CPU runs, and the oracle (skipped when absent)."""

from __future__ import annotations

import pytest

from nitro.envs.soccar.arena_mesh import MeshesNotFoundError, load_arena_mesh
from tests.envs.soccar.conftest import one_thread  # noqa: F401  (autouse here too)


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
