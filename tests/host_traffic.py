"""Find, on a CPU, the host traffic that would stall or break a CUDA hot loop.

On a GPU, ``torch.cuda.set_sync_debug_mode("error")`` catches host syncs and CUDA graph capture catches
host-to-device copies; a CPU has neither. ``HostTraffic`` watches every aten op of a block (a
``TorchDispatchMode``) and records, with the line of code that asked for it:

- ``sync``: a read of a tensor's value on the host (``.item()``, ``bool(t)``, ``int(t)``, ``float(t)``,
  ``.tolist()``, ``.cpu()``, ``.numpy()``);
- ``data-dependent shape``: an op whose output size depends on tensor values (``nonzero``, boolean-mask
  indexing, ``masked_select``, ``unique``, ``repeat_interleave`` by a tensor), which syncs on CUDA;
- ``host data``: a tensor built from Python data (``torch.tensor(list)``, ``torch.as_tensor``, indexing by
  a Python list): on CUDA a copy from pageable host memory, a sync, and an error inside graph capture;
- ``no device``: a tensor made without ``device=`` (``torch.arange(n)``): it lands on the CPU and is
  copied to the GPU. Found by making the block's default device ``meta``: such tensors come out on it.

Python scalars in ops (``torch.where(m, 0.0, x)``, ``x + 1``) are kernel arguments, not traffic.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = str(Path(__file__).resolve().parents[1])
HERE = str(Path(__file__).resolve())
PREFIXES = tuple({str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)})
"""Python's own installs: a virtual environment may sit inside the repository (CI's does), and its frames are not ours."""
aten = torch.ops.aten
DATA_DEPENDENT = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default, aten.unique_dim.default,
                  aten.unique_consecutive.default, aten.repeat_interleave.Tensor}
"""Ops whose output size depends on the values of their inputs (besides boolean-mask indexing)."""
HOST_READS = ("tolist", "cpu", "numpy")
"""Tensor methods that copy values to the host without passing through an aten op on a CPU tensor."""


def _caller() -> str:
    """The innermost frame of this repository outside this file: where the op came from."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith(ROOT) and not frame.filename.startswith(PREFIXES) and frame.filename != HERE:
            return f"{Path(frame.filename).relative_to(ROOT)}:{frame.lineno} {frame.line}"
    return "<outside the repository>"


class HostTraffic(TorchDispatchMode):
    """``with HostTraffic() as traffic: ...`` then ``traffic.found``: a list of (kind, op, where)."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str, str]] = []
        self._patched: dict[str, object] = {}

    def _note(self, kind: str, what: str) -> None:
        self.found.append((kind, what, _caller()))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten._local_scalar_dense.default:
            self._note("sync", "read of a tensor value on the host (.item(), bool(), int(), float())")
        elif func in DATA_DEPENDENT:
            self._note("data-dependent shape", str(func))
        elif func is aten.index.Tensor and any(i is not None and i.dtype == torch.bool for i in args[1]):
            self._note("data-dependent shape", "boolean-mask indexing")
        elif func in (aten.lift_fresh.default, aten.lift_fresh_copy.default):
            self._note("host data", "a tensor built from Python data (torch.tensor / as_tensor / list index)")
        if any(isinstance(x, torch.Tensor) and x.device.type == "meta"
               for x in torch.utils._pytree.tree_leaves((args, kwargs))):
            self._note("no device", f"{func} on a tensor made without device=")  # (the op may then fail)
        return func(*args, **kwargs)

    def __enter__(self):
        for name in HOST_READS:
            original = getattr(torch.Tensor, name)
            self._patched[name] = original

            def read(tensor, *a, _name=name, _original=original, **k):
                self._note("sync", f".{_name}()")
                return _original(tensor, *a, **k)

            setattr(torch.Tensor, name, read)
        self._default = torch.get_default_device()
        torch.set_default_device("meta")
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        torch.set_default_device(self._default)
        for name, original in self._patched.items():
            setattr(torch.Tensor, name, original)
        self._patched.clear()
        return out

    def report(self) -> str:
        """One line per distinct finding, with its count."""
        counts: dict[tuple[str, str, str], int] = {}
        for f in self.found:
            counts[f] = counts.get(f, 0) + 1
        return "\n".join(f"{kind}: {what} at {where} (x{n})" for (kind, what, where), n in counts.items())
