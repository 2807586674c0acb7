"""The soccar package on an install without Triton (a CPU build of PyTorch): it imports and steps on
the PyTorch reference. Run in a subprocess that blocks `import triton`, so the check holds on machines
that have Triton too."""

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["triton"] = None  # `import triton` raises ImportError, as on a CPU-only install
import torch
from nitro.envs.soccar import Arena, kernels
assert not kernels.available()
arena = Arena(2, blue=1, orange=1, device="cpu")
arena.step(torch.zeros(2, 2, 8), ticks=2)
print(int(arena.state.tick_count[0]))
"""


def test_soccar_imports_and_steps_without_triton():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "2"
