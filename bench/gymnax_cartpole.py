"""gymnax CartPole-v1 raw stepping (JAX: jit + scan + vmap), timed the way ``nitro bench`` times ours.

Random actions, auto-reset included, reward and done carried out of every step. Host timer around
``block_until_ready`` after a compile/warm-up call; median of repeats.

    python bench/gymnax_cartpole.py --num-envs 8192 65536 1048576 --steps 100 --out bench/results/x.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-envs", type=int, nargs="+", default=[8192, 65536, 1048576])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import gymnax
    import jax

    env, params = gymnax.make("CartPole-v1")
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    results = []
    for n in args.num_envs:
        def rollout(key, state, reward, done):
            def body(carry, _):
                key, state, _, _ = carry
                key, k_act, k_step = jax.random.split(key, 3)
                action = jax.random.randint(k_act, (n,), 0, 2)
                # gymnax 1.x: (obs, state, reward, terminated, truncated, info)
                _, state, reward, terminated, truncated, _ = step(jax.random.split(k_step, n), state, action,
                                                                 params)
                done = terminated | truncated
                return (key, state, reward, done), None

            return jax.lax.scan(body, (key, state, reward, done), None, length=args.steps)[0]

        try:
            key = jax.random.PRNGKey(0)
            _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, n), params)
            fn = jax.jit(rollout, donate_argnums=(1, 2, 3))
            carry = (key, state, jax.numpy.zeros(n), jax.numpy.zeros(n, dtype=bool))
            carry = jax.block_until_ready(fn(*carry))
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                carry = jax.block_until_ready(fn(*carry))
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            r = {"env": "gymnax CartPole-v1", "num_envs": n, "steps": args.steps, "mode": "jit+scan+vmap",
                 "median_s": med, "steps_per_s": n * args.steps / med}
        except Exception as e:  # noqa: BLE001 - record and go on to the next size
            r = {"env": "gymnax CartPole-v1", "num_envs": n, "error": repr(e)[:400]}
        results.append(r)
        print(f"gymnax {n:>10} envs  {r.get('steps_per_s', r.get('error')):}", flush=True)
    record = {"benchmark": "gymnax_env_steps", "jax": jax.__version__, "gymnax": gymnax.__version__
              if hasattr(gymnax, "__version__") else "1.0.1",
              "device_name": str(jax.devices()[0]), "results": results}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
