"""`device_tables`: made once per key, and read (not rebuilt) by compiled code."""

from __future__ import annotations

import torch

from nitro.core.tables import device_tables


def test_tables_are_made_once_and_are_the_compiled_graphs_constants():
    calls = []

    @device_tables
    def table(device):
        calls.append(device)
        return torch.tensor([10, 20, 30], device=device)

    cpu = torch.device("cpu")
    assert table(cpu) is table(cpu) and calls == [cpu]
    ops = []

    def backend(gm, example_inputs):
        ops.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return gm

    out = torch.compile(lambda i: table(i.device)[i], backend=backend, fullgraph=True)(torch.tensor([2, 0]))
    assert out.tolist() == [30, 10] and calls == [cpu]
    assert torch.tensor not in ops  # the graph indexes the table made above
