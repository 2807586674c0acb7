"""Shared fixtures of the monitor tests."""

from __future__ import annotations

import pytest
from monitor_helpers import synthetic_cars

from nitro.envs.soccar.mesh import MeshesNotFoundError, find_soccar_meshes
from nitro.monitor import replay as R


@pytest.fixture
def cars_replay() -> R.Replay:
    return synthetic_cars()


@pytest.fixture(scope="session")
def meshes_available():
    try:
        return find_soccar_meshes()
    except MeshesNotFoundError as error:
        pytest.skip(str(error))
