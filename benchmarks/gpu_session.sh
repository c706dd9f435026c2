#!/usr/bin/env bash
# The paper scale's GPU checks as one prepared run (a GPU session has about 9 minutes of device time for it).
# Here, first:   bash ../shared/tools/device-pack.sh mnist usps
# Then through the device tool, carrying .devpack:   bash .devpack/on-device.sh bash benchmarks/gpu_session.sh
# Writes at most 8 files under $OUT (what comes back): the CUDA golden test, the cost meter's record and table, and
# CCFC's MNIST column at p = 0 at the paper's settings (NMI per round), cut at the time budget and resumable.
# Test it on a CPU with:   OUT=/tmp/gpu-dry GPU_SESSION_DRY=1 bash benchmarks/gpu_session.sh
set -u
OUT=${OUT:-/tmp/gpu-session}; mkdir -p "$OUT"
budget=${GPU_SESSION_SECONDS:-500}   # seconds for the whole script; the device call's timeout_s should leave a margin
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
dry=${GPU_SESSION_DRY:-}
{
  echo "started $(date -u +%FT%TZ) budget ${budget}s dry=${dry:-no}"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
  # 1. Bytecode for torch's lazily imported modules: with PYTHONDONTWRITEBYTECODE every process compiles
  #    torch._dynamo/_inductor and sympy from source when the first optimiser is built (3.7 s per process on the H200).
  [ -n "$dry" ] || python3 -m compileall -q -j 0 "$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')" >/dev/null 2>&1
  echo "compileall done at $(( budget - $(left) ))s"
} > "$OUT/session.txt" 2>&1
# 2. Every algorithm's golden set-up on CUDA against its CPU recording (skips without a GPU).
timeout $(( $(left) > 150 ? 150 : $(left) )) python3 -m pytest tests/test_cuda_golden.py -q -p no:cacheprovider > "$OUT/cuda_golden.txt" 2>&1
echo "cuda golden: rc $? at $(( budget - $(left) ))s" >> "$OUT/session.txt"
# 3. The cost meter: seconds per round of every headline column at the paper's settings, and each table's projection.
if [ -n "$dry" ]; then cost=(ccfc --scale smoke --rounds 1); else cost=(all --scale paper --rounds 2); fi
timeout $(( $(left) > 180 ? 180 : $(left) )) fedlearn-repro cost "${cost[@]}" --json "$OUT/cost.json" > "$OUT/cost.txt" 2>&1
echo "cost meter: rc $? at $(( budget - $(left) ))s" >> "$OUT/session.txt"
# 4. CCFC, MNIST, p = 0, the paper's network and schedule, NMI every round, for the time that is left.
if [ -n "$dry" ]; then ccfc=(--rounds 2 --per-class 20 --device cpu); else ccfc=(--channels 64,128,256 --device cuda --threads 8); fi
timeout $(( $(left) - 10 )) python3 papers/supplementary/ccfc_full_mnist.py "${ccfc[@]}" --out "$OUT/ccfc_paper" --work /tmp/ccfc-paper > "$OUT/ccfc_paper.txt" 2>&1
echo "ccfc column: rc $? (124: cut at the budget; the per-round log is in ccfc_paper/) at $(( budget - $(left) ))s" >> "$OUT/session.txt"
cat "$OUT/session.txt"
