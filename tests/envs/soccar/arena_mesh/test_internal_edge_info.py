"""Bullet's internal-edge info of the loaded arena."""

from __future__ import annotations

import numpy as np

from nitro.envs.soccar import constants as C


def test_internal_edge_info(mesh):
    """Every triangle edge shared within a file has an angle; flat neighbours have angle 0 exactly."""
    angle = mesh.edge_angle.numpy()
    has_neighbour = np.abs(angle) < C.INTERNAL_EDGE_MAX_ANGLE
    # 884 of the 24,060 triangle edges sit on a file's boundary (counted from the files).
    assert (~has_neighbour).sum() == 884
    tv = mesh.tri_verts.numpy().astype(np.float64)
    flat = has_neighbour & (angle == 0)
    assert flat.sum() > 0 and (has_neighbour & ~flat).sum() > 0
    # Bullet calls an edge planar when its faces differ by under 0.01 rad (|sin|^2 < 1e-4).
    assert np.abs(angle[has_neighbour & ~flat]).min() > 0.01
    assert np.isfinite(tv).all()
