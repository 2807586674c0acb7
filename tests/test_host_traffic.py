"""The host-traffic detector (tests/host_traffic.py) catches each kind of traffic a CUDA hot loop must not
have, and lets through what is free on a GPU (Python scalars in ops, tensors made on the device)."""

from __future__ import annotations

import pytest
import torch

from tests.host_traffic import HostTraffic

X = torch.arange(6)
MASK = X % 2 == 0


@pytest.mark.parametrize("kind, fn", [
    ("sync", lambda: X[0].item()),
    ("sync", lambda: bool(MASK.any())),
    ("sync", lambda: int(X.sum())),
    ("sync", lambda: X.tolist()),
    ("sync", lambda: X.cpu()),
    ("data-dependent shape", lambda: MASK.nonzero()),
    ("data-dependent shape", lambda: X[MASK]),
    ("host data", lambda: torch.tensor([1, 2, 3], device=X.device)),
    ("host data", lambda: X[[0, 2]]),
    ("no device", lambda: X + torch.arange(6)),
])
def test_each_kind_is_caught(kind, fn):
    with HostTraffic() as traffic:
        try:
            fn()
        except RuntimeError:  # a CPU tensor meeting one made without device= (on "meta" here) may fail
            pass
    assert kind in {k for k, _, _ in traffic.found}, traffic.report()
    assert "test_host_traffic.py" in traffic.report()  # names the line that asked for it


def test_device_work_passes():
    with HostTraffic() as traffic:
        y = torch.where(MASK, 0.0, X.float()) + 1
        y = y * torch.arange(6, device=X.device) + torch.full_like(y, 2.0)
        y.index_select(0, X.flip(0)).argmax().repeat_interleave(2)
    assert not traffic.found, traffic.report()
