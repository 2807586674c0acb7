"""The adapters are optional: importing nitro or nitro.adapters pulls in neither Gymnasium nor SB3, and a
missing framework raises an ImportError that names the extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import sys
    import nitro, nitro.adapters
    nitro.make("CartPole-v1", num_envs=2, device="cpu").reset()
    assert "gymnasium" not in sys.modules and "stable_baselines3" not in sys.modules, "imported eagerly"
    assert "pettingzoo" not in sys.modules, "imported eagerly"

    for framework, name in (("gymnasium", "GymnasiumVectorEnv"), ("stable_baselines3", "SB3VecEnv"),
                            ("pettingzoo", "PettingZooParallelEnv")):
        sys.modules[framework] = None  # as if not installed
        try:
            getattr(nitro.adapters, name)
        except ImportError as e:
            assert 'pip install "nitro-rl[adapters]"' in str(e), str(e)
            assert framework.replace("_", "-") in str(e), str(e)
        else:
            raise AssertionError(f"{name} imported without {framework}")
        del sys.modules[framework]
    try:
        nitro.adapters.NoSuchAdapter
    except AttributeError:
        pass
    else:
        raise AssertionError("unknown adapter name did not raise")
    print("ok")
''')


def test_adapters_import_lazily_and_name_the_extra():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
