#!/usr/bin/env bash
# Weak scaling of `nitro train soccar` (1v1, collection + update): the same per-GPU batch on 1 and on
# 2 GPUs of one host, each run cut after SECONDS; agent-steps/s is the median of its logs after the
# first two (set-up and warm-up), from metrics.jsonl. Writes OUTDIR/soccar_multi_gpu.json.
# Usage (GPU machine, repository root): bash bench/soccar_multi_gpu.sh OUTDIR [SECONDS] [ENVS_PER_GPU]
set -u
OUT=${1:?usage: soccar_multi_gpu.sh OUTDIR [SECONDS] [ENVS_PER_GPU]}
SECONDS_PER_RUN=${2:-120}
ENVS=${3:-4096}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${PYTHONPATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # no NVLink multicast
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/device.txt"
for gpus in 1 2; do
  rm -rf "$OUT/runs/gpus$gpus"
  timeout "$SECONDS_PER_RUN" torchrun --standalone --nproc-per-node=$gpus -m nitro.cli train soccar \
    env.num_envs=$ENVS ppo.total_steps=100_000_000_000 run.log_every=2 run.console=false run.tensorboard=false \
    run.checkpoint_every=1000000 run.checkpoint_seconds=0 run.dir="$OUT/runs" run.name=gpus$gpus \
    > "$OUT/gpus$gpus.log" 2>&1
done
python3 - "$OUT" "$ENVS" <<'EOF'
import json, statistics, sys
from pathlib import Path

out, envs = Path(sys.argv[1]), int(sys.argv[2])
result = {"bench": "soccar_multi_gpu", "envs_per_gpu": envs, "device": (out / "device.txt").read_text().splitlines()[1:],
          "runs": {}}
for gpus in (1, 2):
    rows = [json.loads(line) for line in (out / "runs" / f"gpus{gpus}" / "metrics.jsonl").read_text().splitlines()
            if line.strip()] if (out / "runs" / f"gpus{gpus}" / "metrics.jsonl").exists() else []
    sps = [r["perf/sps"] * 2 for r in rows[2:]]  # env steps/s of all ranks, 2 agents (cars) per 1v1 env
    result["runs"][gpus] = {"logs": len(rows), "agent_steps_per_s": statistics.median(sps) if sps else None,
                            "updates": rows[-1]["update"] if rows else None}
one, two = result["runs"][1]["agent_steps_per_s"], result["runs"][2]["agent_steps_per_s"]
result["speedup_2_gpus"] = two / one if one and two else None
(out / "soccar_multi_gpu.json").write_text(json.dumps(result, indent=1))
print(json.dumps(result))
EOF
