#!/usr/bin/env bash
# One device call's worth of GPU measurements for the GPU issue (about 9 minutes on one H100), extending
# ../shared/gpu-probes/measure.sh: the CUDA tests, the paper round of cnn and resnet20 per trainer through
# the real engine, byte-identical reruns and a kill -9 resume on CUDA, one job alone against four sharing
# the GPU (the "fill each GPU" question, with the GPU's busy time), and `asyncfl bench --device cuda`.
# Every step under its own timeout; a short table last; logs under $OUT.
#
# Stage the real data once, in the project's root (the device sees only the checkout and carried folders):
#   echo /.gpu/ >> .git/info/exclude && mkdir -p .gpu/data && cp /usr/share/datasets/fashion-mnist/*.gz .gpu/data/
# then on the device, carrying .gpu:   bash tests/gpu/session.sh
# A device call has 10 minutes: run the steps in two calls, STEPS="1 2" then STEPS="3 4 5" (default: all).
# A CPU smoke run of the same commands (checks the script, measures nothing):
#   DEVICE=cpu DATASET=digits ROOT=resources/data/digits EPOCHS=1 QUICK=1 bash tests/gpu/session.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-out} DEVICE=${DEVICE:-cuda} DATASET=${DATASET:-fashion-mnist} ROOT=${ROOT:-.gpu/data}
EPOCHS=${EPOCHS:-10} QUICK=${QUICK:-} STEPS=${STEPS:-1 2 3 4 5}
mkdir -p "$OUT"; work=$(mktemp -d); table="$OUT/table.txt"; : > "$table"
export ASYNCFL_GPU_LOCKS="$work/locks"
row() { echo "$*" | tee -a "$table"; }
step() { [[ " $STEPS " == *" $1 "* ]]; }
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
fi
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

# 1. The training tests, CUDA-only ones included (they skip on the CPU).
if step 1; then
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider tests/training >"$OUT/tests.log" 2>&1
  row "training tests: rc=$? $(tail -1 "$OUT/tests.log")"
fi

python3 -m asyncfl partition --dataset "$DATASET" --root "$ROOT" --clients 10 --alpha 0.5 --seed 0 \
  --out "$work/part.npz" >"$OUT/partition.log" 2>&1 || row "partition failed: $(tail -1 "$OUT/partition.log")"
# one run of the paper's setting (C = 10, alpha 0.5, J = 5, I = $EPOCHS, batch 64), under a timeout:
#   train SECONDS MODEL TRAINER ROUNDS SEED FOLDER
train() {
  timeout "$1" python3 -m asyncfl train --dataset "$DATASET" --root "$ROOT" --partition "$work/part.npz" \
    --model "$2" --algorithm afl --clients-per-round 5 --local-epochs "$EPOCHS" --rounds "$4" --seed "$5" \
    --settings "{\"device\":\"$DEVICE\",\"trainer\":\"$3\",\"eval_every\":1000,\"checkpoint_every\":2}" --out "$6"
}
# mean wall seconds per round after the first (which pays the captures and the warm-up)
per_round() { python3 -c "import pandas as p,sys; w=p.read_csv(sys.argv[1]+'/timings.csv').wall_seconds.values; print(round((w[-1]-w[0])/max(1,len(w)-1),3))" "$1"; }
seconds_since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$1"; }

# 2. Seconds per paper round through the real engine, per model and trainer.
for model in cnn resnet20; do
  step 2 || break
  rounds=6; [ "$model" = resnet20 ] && rounds=3
  for trainer in vectorised graphed plain; do
    if train 240 "$model" "$trainer" "$rounds" 0 "$work/${model}_$trainer" >"$OUT/train_${model}_$trainer.log" 2>&1; then
      row "paper round $model $trainer: $(per_round "$work/${model}_$trainer") s"
    else
      row "paper round $model $trainer: rc=$? $(tail -1 "$OUT/train_${model}_$trainer.log" | cut -c1-150)"
    fi
  done
done

# 3. Determinism: the graphed cnn run three times: once, again, and killed with -9 after its first
#    checkpoint, then resumed.
if step 3; then
  train 240 cnn graphed 4 0 "$work/first" >"$OUT/first.log" 2>&1
  train 240 cnn graphed 4 0 "$work/again" >"$OUT/again.log" 2>&1
  train 240 cnn graphed 4 0 "$work/killed" >"$OUT/killed.log" 2>&1 &
  victim=$!
  for _ in $(seq 600); do [ -e "$work/killed/checkpoint.pt" ] || ! kill -0 "$victim" 2>/dev/null && break; sleep 0.5; done
  pkill -9 -f -- "--out $work/killed"; wait "$victim" 2>/dev/null
  row "killed -9 with a checkpoint: $([ -e "$work/killed/checkpoint.pt" ] && echo yes || echo NO)"
  train 240 cnn graphed 4 0 "$work/killed" >>"$OUT/killed.log" 2>&1
  for copy in again killed; do
    for f in metrics.csv events.csv model.pt; do
      cmp -s "$work/first/$f" "$work/$copy/$f" && row "$copy $f: identical" || row "$copy $f: DIFFERS"
    done
  done
fi

# 4. Fill the GPU: one graphed cnn run alone, the GPU's busy time sampled, against four at once on the
#    one GPU (the later three take the lock's second places: they share it and say so).
if step 4; then
  sampler=
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 >"$OUT/busy_alone.txt" &
    sampler=$!
  fi
  start=$(date +%s.%N)
  train 300 cnn graphed 6 1 "$work/alone" >"$OUT/alone.log" 2>&1
  alone=$(seconds_since "$start")
  [ -n "$sampler" ] && kill "$sampler"
  start=$(date +%s.%N)
  for seed in 1 2 3 4; do train 400 cnn graphed 6 "$seed" "$work/shared_$seed" >"$OUT/shared_$seed.log" 2>&1 & done
  wait
  together=$(seconds_since "$start")
  busy=$(python3 -c "import sys; v=[float(x) for x in open(sys.argv[1]) if x.strip()]; print(round(sum(v)/len(v)), '%')" "$OUT/busy_alone.txt" 2>/dev/null || echo n/a)
  row "one cnn run alone: $alone s (GPU busy $busy); four at once: $together s → throughput ×$(python3 -c "print(round(4 * $alone / $together, 2))")"
  cat "$OUT"/shared_*.log | grep -c "sharing cuda" | sed 's/^/  jobs that said they share: /' | tee -a "$table"
fi

# 5. The benchmark: trainer rows, the paper round per trainer, the projected sweep.
if step 5; then
  timeout 360 python3 -m asyncfl bench --device "$DEVICE" ${QUICK:+--quick} --sweep config/config.yaml \
    --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  row "bench: rc=$? (bench.log)"
  tail -25 "$OUT/bench.log"
fi
echo; echo "== table"; cat "$table"
