#!/usr/bin/env bash
# Weak scaling of end-to-end PPO on CartPole: the same per-GPU batch on 1 and on 2 GPUs of one host.
# Usage (GPU machine, repository root): bash bench/multi_gpu.sh OUTDIR
set -u
OUT=${1:?usage: multi_gpu.sh OUTDIR}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/device.txt"
nvidia-smi topo -m | tee -a "$OUT/device.txt"
V="run.precision=bf16"
for n in 65536 262144 1048576; do
  CUDA_VISIBLE_DEVICES=0 timeout 120 python3 bench/ppo_cartpole.py throughput --num-envs $n --variants "$V" \
    --out "$OUT/ppo_1gpu_$n.json" 2>&1 | grep "{"
  timeout 150 torchrun --standalone --nproc-per-node=2 bench/ppo_cartpole.py throughput --num-envs $n \
    --variants "$V" --out "$OUT/ppo_2gpu_$n.json" 2>&1 | grep "{"
done
echo "=== nitro train cartpole on 2 GPUs"
timeout 150 torchrun --standalone --nproc-per-node=2 -m nitro.cli train cartpole env.num_envs=16384 \
  ppo.num_steps=16 ppo.total_steps=200_000_000 run.precision=bf16 run.console=false run.dir=/tmp/runs 2>&1 | grep "{"
