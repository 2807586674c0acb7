#!/usr/bin/env bash
# One device call: GPU tests, CartPole raw stepping (ours and gymnax), PPO throughput and time to solve;
# other stages on request (league, skullking, skullking-checks, skullking-ppo, skullking-learn: ~8 min each;
# soccar-cars, soccar-game, soccar-rl: ~4-5 min each, their first fused launches compile the stage kernels;
# soccar-learn: ~9 min; soccar stages need the meshes: carry .meshes and export NITRO_MESHES; soccar-warm
# compiles the fused step's kernels in parallel into TRITON_CACHE_DIR, set it to keep them for later stages;
# or compile them on a CPU beforehand with bench/soccar_compile_cpu.py --cache DIR, carry DIR and the same
# tree, run its --relocate DIR there and set TRITON_CACHE_DIR=DIR: the soccar stages then start at once).
# Usage (on the GPU machine, from the repository root): bash bench/gpu_session.sh OUTDIR [stages...]
set -u
OUT=${1:?usage: gpu_session.sh OUTDIR [stages]}; shift
STAGES=${*:-"tests envs gymnax ppo solve"}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${PYTHONPATH:-}
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PYTHONPATH:/tmp/site; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/device.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a "$OUT/device.txt"
for s in $STAGES; do
  echo "=== $s $(date +%T)"
  case $s in
    tests)  timeout 120 python3 -m pytest -q -m gpu tests/test_cuda_paths.py -p no:cacheprovider --tb=line 2>&1 | tail -15 ;;
    envs)   timeout 260 python3 -m nitro.cli bench CartPole-v1 --num-envs 8192 65536 262144 1048576 4194304 16777216 \
              --steps 100 --mode eager compile graph --repeats 7 --out "$OUT/cartpole_env.json" ;;
    code)   TORCH_LOGS=output_code timeout 120 python3 -m nitro.cli bench CartPole-v1 --num-envs 1048576 --steps 10 \
              --mode compile --no-save > "$OUT/cartpole_code.txt" 2>&1; grep -c "def triton" "$OUT/cartpole_code.txt" ;;
    gymnax) timeout 150 python3 bench/gymnax_cartpole.py --num-envs 8192 65536 262144 1048576 4194304 16777216 \
              --steps 100 --out "$OUT/gymnax_cartpole.json" ;;
    ppo)    timeout 200 python3 bench/ppo_cartpole.py throughput --num-envs 65536 262144 1048576 \
              --variants "run.precision=bf16" --out "$OUT/ppo_throughput.json"
            timeout 150 python3 bench/ppo_cartpole.py throughput --num-envs 1048576 \
              --variants "" "run.precision=bf16 run.compile=false" --out "$OUT/ppo_throughput_variants.json" ;;
    solve)  timeout 240 python3 bench/ppo_cartpole.py solve --num-envs 16384 65536 --seeds 3 --variants "run.precision=bf16" \
              --out "$OUT/ppo_solve.json" ;;
    firsthour) timeout 300 python3 bench/first_hour.py "$OUT/first_hour" ;;
    league) timeout 250 python3 bench/league_gpu.py throughput --out "$OUT/league"
            timeout 250 python3 bench/league_gpu.py learn --out "$OUT/league" ;;
    monitor) timeout 120 python3 -m pytest -q -m gpu tests/monitor/test_gpu.py -p no:cacheprovider --tb=line 2>&1 | tail -15
            timeout 290 python3 bench/monitor_gpu.py "$OUT/monitor" ;;
    skullking)        timeout 250 python3 bench/skullking_gpu.py env --out "$OUT"
                      timeout 250 python3 bench/skullking_gpu.py players --out "$OUT" ;;
    skullking-checks) timeout 250 python3 bench/skullking_gpu.py checks --out "$OUT"
                      timeout 250 python3 bench/skullking_gpu.py bots --out "$OUT" ;;
    skullking-ppo)    timeout 250 python3 bench/skullking_gpu.py cpu --out "$OUT"
                      timeout 250 python3 bench/skullking_gpu.py ppo --out "$OUT" ;;
    skullking-learn)  timeout 250 python3 bench/skullking_gpu.py learn --variant flat --out "$OUT"
                      timeout 250 python3 bench/skullking_gpu.py learn --variant hierarchical --out "$OUT" ;;
    soccar-warm)  # every stage kernel of every team size compiled at once into TRITON_CACHE_DIR (reused by later stages)
                  timeout 300 python3 bench/soccar_warm.py "$OUT/soccar" --sizes 1v1,2v2,3v3 --jobs 12 &
                  timeout 300 python3 bench/soccar_warm.py "$OUT/soccar_1v0" --sizes 1v0 --blocks 32,64 --jobs 6; wait ;;
    soccar-stages) timeout 200 python3 bench/soccar_stages_gpu.py --out "$OUT/soccar" ;;
    soccar-speed) timeout 200 python3 bench/soccar_cars_gpu.py --out "$OUT/soccar" --budget 180 --only cars_fused \
                    --fused-configs 32,64
                  timeout 230 python3 bench/soccar_game_gpu.py --out "$OUT/soccar" --budget 210 --only game_fused,game_checks ;;
    soccar-tests) timeout 300 python3 -m pytest -q -n 16 -p no:cacheprovider tests/envs/soccar/kernels \
                    tests/envs/soccar/test_kernels.py --tb=short 2>&1 | tail -30 ;;
    soccar-cars)  timeout 290 python3 bench/soccar_cars_gpu.py --out "$OUT/soccar" --budget 270 ;;
    soccar-game)  timeout 290 python3 -m pytest -q -m gpu tests/envs/soccar -p no:cacheprovider --tb=short 2>&1 | tail -20
                  timeout 290 python3 bench/soccar_game_gpu.py --out "$OUT/soccar" --budget 270 ;;
    soccar-rl)    timeout 260 python3 bench/soccar_rl_gpu.py --out "$OUT/soccar" --budget 240 ;;
    soccar-learn) timeout 590 python3 bench/soccar_learn_gpu.py --out "$OUT/soccar_learn" --budget 420 --limit 570 ;;
    *) echo "unknown stage $s" ;;
  esac
done
echo "=== done $(date +%T)"
