#!/usr/bin/env bash
# One device call's worth of GPU measurements for the GPU issue, sized to a 15-minute lease (one call of
# at most 10 minutes after a start of a minute or two): the CUDA-only tests; the paper round per model and
# trainer through the real engine; 8 and 32 runs stepped together in one process against one alone, and
# the sweep's device-hours so; a kill -9 resume on CUDA with the same bytes; clients training at once on
# the real clock (step 8); the fast profile's accuracy
# cost; `asyncfl bench --device cuda --quick`; and, after the paper round, the card's rows of the cost
# table (step 7). Steps in that order of priority, each under its own
# timeout and all under one budget (BUDGET seconds): a step that no longer fits says "skipped", and the
# table always comes last. Logs under $OUT.
#
# Stage the real data once, in the project's root (the device sees only the checkout and carried folders):
#   echo /.gpu/ >> .git/info/exclude && mkdir -p .gpu/data && cp /usr/share/datasets/fashion-mnist/*.gz .gpu/data/
# then on the device, carrying .gpu:   bash tests/gpu/session.sh
# A CPU smoke run of the same commands (checks the script, measures nothing), the digits prepared first:
#   python3 -m asyncfl data --dataset digits --root resources/data/digits
#   DEVICE=cpu DATASET=digits ROOT=resources/data/digits EPOCHS=1 STEPS="1 2 3 4 8 5 6" bash tests/gpu/session.sh
# (about 3 minutes on 2 cores; step 7, the cost table at the paper's sizes, outlasts its timeout on a CPU)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 ASYNCFL_REQUIRE_CUDA=1
OUT=${OUT:-/tmp/gpu-out} DEVICE=${DEVICE:-cuda} DATASET=${DATASET:-fashion-mnist} ROOT=${ROOT:-.gpu/data}
EPOCHS=${EPOCHS:-10} STEPS=${STEPS:-1 2 7 3 4 8 5 6} BUDGET=${BUDGET:-560}
# TOGETHER: the numbers of runs step 3 steps together; on a 2-core CPU 8 outlast their timeout, so the
# smoke run steps fewer
if [ "$DEVICE" = cpu ]; then unset ASYNCFL_REQUIRE_CUDA; TOGETHER=${TOGETHER:-2 4}; else TOGETHER=${TOGETHER:-8 32}; fi
# A device call brings back at most 8 files: the logs travel as one archive, made last.
logs="$OUT/logs"; mkdir -p "$logs"; work=$(mktemp -d); table="$OUT/table.txt"; : > "$table"
export ASYNCFL_GPU_LOCKS="$work/locks"
row() { echo "$*" | tee -a "$table"; }
# why RC (a step's exit status) failed, in one line: a timeout's thread stacks stay in its LOG; else
# its last line that is not a stack (a skipped step's is bounded's "skipped: ...")
why() {
  case $1 in
    124|137) echo "timed out (every thread's stack in logs/$(basename "$2"))" ;;
    *) grep -v '^ *File \|^Thread \|^Current thread\|^Fatal Python' "$2" | tail -1 | cut -c1-150 ;;
  esac
}
step() { [[ " $STEPS " == *" $1 "* ]]; }
# bounded SECONDS CMD...: CMD under a timeout of SECONDS, or of what the budget has left less 20 s and
# less RESERVE (the seconds kept for the later steps); at
# the timeout SIGABRT, so that Python's fault handler logs every thread's stack (where a capture hangs)
bounded() {
  local limit=$1 left=$((BUDGET - SECONDS - 20 - ${RESERVE:-0})); shift
  ((left < limit)) && limit=$left
  ((limit < 15)) && { echo "skipped: the budget is spent" >&2; return 125; }
  timeout -s ABRT -k 5 "$limit" "$@"
}
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
fi
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

# 1. The CUDA-only training tests (the graphed trainer captured and replayed on streams, cnn and
#    resnet20; the GPU locks choosing a device), the CPU ones run in CI; the lockstep's on the device.
if step 1; then
  bounded 90 python3 -m pytest -q -x -p no:cacheprovider tests/training -k cuda >"$logs/tests.log" 2>&1
  row "CUDA tests: rc=$? $(tail -1 "$logs/tests.log")"
  # runs stepped together, on the device (`device: auto`): each run's bytes those it makes alone
  bounded 90 python3 -m pytest -q -x -p no:cacheprovider tests/sim/test_lockstep.py >"$logs/lockstep.log" 2>&1
  row "lockstep tests on $DEVICE: rc=$? $(tail -1 "$logs/lockstep.log")"
fi

# 2. Seconds per paper round (C = 10, J = 5, I = 10, batch 64) through the real engine, one process per
#    row: MODEL TRAINER EPOCHS ROUNDS LIMIT PROFILE, in order of what the issue needs first (fp32 against
#    the fast profile, training rounds alone; the other trainers were measured on 2026-11-25,
#    docs/gpu.md "On a GPU"). Rows at EPOCHS < 10 are scaled to I = 10 (the round is the same
#    steps, I times) and say so. Of ROUNDS, the first (warm-up, captures) and the last (the run's
#    evaluation) are not timed: 6 rounds give 4 training rounds' walls. 300 s stay for steps 3 to 6.
if step 2; then
  while read -r model trainer epochs rounds limit profile; do
    [ "$DEVICE" = cpu ] && epochs=1
    if line=$(RESERVE=300 bounded "$limit" python3 tests/gpu/paper_round.py "$model" "$trainer" "$epochs" "$rounds" "$DEVICE" \
      "$profile" 2>"$logs/round_${model}_${trainer}_$profile.log"); then
      echo "$line" >>"$OUT/rounds.jsonl"
      row "paper round $model $trainer $profile: $(python3 -c "import json,sys; r=json.loads(sys.argv[1]); print(r['paper_seconds_per_round'], 's', '(I=%d, x%g)' % (r['local_epochs'], 10/r['local_epochs']) if r['scaled_from_epochs'] else '', '; first round', r['first_round_s'], 's; training rounds', r['round_walls'])" "$line")"
    else
      rc=$?; row "paper round $model $trainer $profile: rc=$rc $(why $rc "$logs/round_${model}_${trainer}_$profile.log")"
    fi
  done <<'ROWS'
cnn graphed 10 6 60 fp32
cnn graphed 10 6 60 fast
resnet20 graphed 10 6 110 fp32
resnet20 graphed 10 6 90 fast
mlp graphed 10 6 45 fp32
ROWS
fi

# 7. The cost table the cluster's jobs ask their minutes from (docs/cluster.md "Your cluster"):
#    this card's row of each model, written into a copy of config/costs.csv brought back as costs.csv.
if step 7; then
  cp config/costs.csv "$OUT/costs.csv"
  bounded 120 python3 -m asyncfl bench --device "$DEVICE" --costs "$OUT/costs.csv" >"$logs/costs.log" 2>&1
  rc=$?; ((rc == 0)) && detail=$(tail -3 "$logs/costs.log" | tr '\n' ';' | cut -c1-300) || detail=$(why $rc "$logs/costs.log")
  row "costs: rc=$rc $detail"
fi

bounded 60 python3 -m asyncfl partition --dataset "$DATASET" --root "$ROOT" --clients 10 --alpha 0.5 --seed 0 \
  --out "$work/part.npz" >"$logs/partition.log" 2>&1 || row "partition failed: $(tail -1 "$logs/partition.log")"
# one run of the paper's setting (C = 10, alpha 0.5, J = 5, I = $EPOCHS, batch 64) on real data:
#   train SECONDS SEED FOLDER   (graphed cnn, 4 rounds, a checkpoint every 2)
train() {
  bounded "$1" python3 -m asyncfl train --dataset "$DATASET" --root "$ROOT" --partition "$work/part.npz" \
    --model cnn --algorithm afl --clients-per-round 5 --local-epochs "$EPOCHS" --rounds 4 --seed "$2" \
    --settings "{\"device\":\"$DEVICE\",\"trainer\":\"graphed\",\"eval_every\":1000,\"checkpoint_every\":2}" --out "$3"
}
seconds_since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$1"; }
same() { for f in metrics.csv events.csv model.pt; do cmp -s "$work/first/$f" "$work/$1/$f" && echo "$f same" || echo "$f DIFFERS"; done | paste -sd, -; }

# 3. Runs stepped together in one process (train-many's lockstep: every run's clients in one training
#    call) against one alone, per paper model, in the fast profile at I = 1, and the sweep's
#    device-hours with its jobs of at least that many runs stepped together (`asyncfl bench --together`;
#    earlier, processes sharing the GPU: cnn 1.94× at 8, resnet20 1.05×, docs/gpu.md "On a GPU").
if step 3; then
  quick=; [ "$DEVICE" = cpu ] && quick=--quick
  for runs in $TOGETHER; do
    bounded 150 python3 -m asyncfl bench --device "$DEVICE" --together "$runs" --profile fast $quick \
      --sweep config/config.yaml --json "$OUT/together_$runs.json" >"$logs/together_$runs.log" 2>&1
    rc=$?; ((rc == 0)) && detail=$(grep -E '^  |device-hours' "$logs/together_$runs.log" | cut -c1-170 | tr '\n' ';') \
      || detail=$(why $rc "$logs/together_$runs.log")
    row "$runs runs together: rc=$rc $detail"
  done
fi

# 4. One run alone; the same run killed with -9 once its first checkpoint is written, then resumed: the
#    same bytes as the run alone.
if step 4; then
  train 120 0 "$work/first" >"$logs/first.log" 2>&1
  first=$?; row "one graphed cnn run (4 rounds, real data): rc=$first $( ((first)) && why $first "$logs/first.log")"
  train 120 0 "$work/killed" >"$logs/killed.log" 2>&1 &
  victim=$!
  for _ in $(seq 400); do [ -e "$work/killed/checkpoint.pt" ] || ! kill -0 "$victim" 2>/dev/null && break; sleep 0.25; done
  pkill -9 -f -- "--out $work/killed"; wait "$victim" 2>/dev/null
  row "killed -9 with a checkpoint: $([ -e "$work/killed/checkpoint.pt" ] && echo yes || echo NO)"
  train 120 0 "$work/killed" >>"$logs/killed.log" 2>&1
  rc=$?; ((rc == 0 && first == 0)) && detail=$(same killed) || detail="not compared: the run alone or the resume failed"
  row "resumed: rc=$rc $detail"
fi

# 8. The asyncio clients on one GPU (docs/clocks.md "The real clock"): a 4-round run at I = 1 on the
#    virtual clock, then on the real clock paced to ~15 wall s, its clients training at once on 5 worker
#    threads, each with a model of its own on the device: its bytes the virtual run's where no dispatch was
#    late, and how many pairs of trainings overlapped in wall time (wall.csv). Per trainer: plain, and
#    graphed (CUDA graphs captured on worker threads while others train).
if step 8; then
  for trainer in plain graphed; do
    clocked() {  # clocked SECONDS FOLDER EXTRA-SETTINGS
      bounded "$1" python3 -m asyncfl train --dataset "$DATASET" --root "$ROOT" --partition "$work/part.npz" \
        --model cnn --algorithm afl --clients-per-round 5 --local-epochs 1 --rounds 4 --seed 0 --out "$2" \
        --settings "{\"device\":\"$DEVICE\",\"trainer\":\"$trainer\",\"eval_every\":1000$3}"
    }
    clocked 90 "$work/virtual_$trainer" "" >"$logs/virtual_$trainer.log" 2>&1 || {
      rc=$?; row "real clock, $trainer: the virtual run: rc=$rc $(why $rc "$logs/virtual_$trainer.log")"; continue; }
    scale=$(python3 -c "import json,sys; print(15 / json.load(open(sys.argv[1]))['virtual_time'])" "$work/virtual_$trainer/run.json")
    clocked 90 "$work/real_$trainer" ",\"clock\":\"real\",\"time_scale\":$scale,\"client_workers\":5" \
      >"$logs/real_$trainer.log" 2>&1
    rc=$?
    if ((rc == 0)); then
      detail=$(python3 - "$work/virtual_$trainer" "$work/real_$trainer" <<'PY'
import csv, json, sys
from pathlib import Path
virtual, real = map(Path, sys.argv[1:])
same = ",".join(f"{f} {'same' if (virtual / f).read_bytes() == (real / f).read_bytes() else 'DIFFERS'}"
                for f in ("metrics.csv", "events.csv", "model.pt"))
rows = list(csv.DictReader((real / "wall.csv").open()))
spans = [(float(r["trained_from"]), float(r["trained_to"]), r["worker"]) for r in rows]
overlapping = sum(a[0] < b[1] and b[0] < a[1] and a[2] != b[2] for i, a in enumerate(spans) for b in spans[i + 1:])
clock = json.loads((real / "run.json").read_text())["clock"]
print(f"{same}; {len(rows)} trainings, {overlapping} overlapping pairs; late dispatches {clock.get('late_dispatches')}")
PY
)
    else
      detail=$(why $rc "$logs/real_$trainer.log")
    fi
    row "real clock, $trainer, time_scale $scale: rc=$rc $detail"
  done
fi

# 5. The fast profile's accuracy cost on CUDA: AFL, resnet20 on digits, 4 paired seeds fp32 against
#    fast, and the fast run rerun (the same bytes): docs/gpu.md "The fast profile's cost".
if step 5; then
  bounded 120 python3 -m asyncfl bench --device "$DEVICE" --profile-cost 4 --json "$OUT/profile_cost.json" \
    >"$logs/profile_cost.log" 2>&1
  rc=$?; ((rc == 0)) && detail=$(grep -E "fast − fp32|trained again" "$logs/profile_cost.log" | tr '\n' ';') \
    || detail=$(why $rc "$logs/profile_cost.log")
  row "profile cost: rc=$rc $detail"
fi

# 6. The benchmark at its quick sizes, as far as the budget goes (trainer rows, the engine's overhead).
if step 6; then
  bounded 200 python3 -m asyncfl bench --device "$DEVICE" --quick --json "$OUT/bench.json" >"$logs/bench.log" 2>&1
  rc=$?; row "bench --quick: rc=$rc $( ((rc)) && why $rc "$logs/bench.log" || echo '(bench.log)')"
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$logs"
echo; echo "== table ($SECONDS s)"; cat "$table"
