#!/usr/bin/env bash
# The project's GPU check in one prepared run, from the repository's root on a GPU machine
# whose Python already has JAX with CUDA, flax, optax, orbax and pytest (a one-GPU box, a
# Colab runtime). Python packages it lacks (tensorflow-datasets, array-record, grain,
# ml-collections, mnist1d, tensorboardx and their pure-Python needs) go in .whl/ as wheels;
# Fashion-MNIST's four .gz files, if wanted, in .fmnist/. Logs go to $OUT (default
# /tmp/gpu-out); each step prints its time and the end of its log.
#   MODE=smoke: install, the devices, the README's default run
#   MODE=full:  also the Fashion-MNIST run, the benchmark's GPU rows with and without
#               deterministic ops (ResNet-20 at batch 128, MLP, CNN1D), the tests a GPU
#               changes (precision, resume bit for bit, the seam, compression)
set -u
MODE=${MODE:-full}
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 TFDS_DATA_DIR=/tmp/tfds
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -d .fmnist ] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p /usr/share/datasets && cp -r .fmnist /usr/share/datasets/fashion-mnist
fi
timed() {  # name, cap in seconds, command...
  local name=$1 cap=$2; shift 2; local t0; t0=$(date +%s)
  echo "=== $(date +%T) $name (cap ${cap}s)"
  timeout -k 5 "$cap" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc wall=$(( $(date +%s) - t0 ))s" | tee -a "$OUT/summary.txt"
  tail -n 8 "$OUT/$name.log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
$PY -c "import jax, flax, optax; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, jax.devices())" | tee -a "$OUT/gpu.txt"
# The training runs set deterministic GPU ops themselves (train.deterministic, default on).
timed default_run "${CAP_DEFAULT:-150}" $PY -m experiments.train --config configs/default.py \
  --workdir /tmp/runs/default --config.train.progress_bar=false
[ "$MODE" = smoke ] && exit 0
if [ -d /usr/share/datasets/fashion-mnist ]; then
  timed fashion_ssgd "${CAP_FASHION:-150}" $PY -m experiments.train \
    --config configs/fashion_mnist_lenet.py:ssgd --workdir /tmp/runs/fm --config.train.progress_bar=false
fi
ROWS=${ROWS:-"ssgd,odsgd,odsgd (replay + spike),pseudo_sync,pseudo_sync (as shipped: replay + spike),local_sgd (non-sync steps),oscars (non-sync steps),easgd (period 1)"}
MODELS=${MODELS:-resnet20_b128,mlp,cnn1d}
timed benchmark "${CAP_BENCH:-240}" $PY scripts/benchmark.py --steps "${BENCH_STEPS:-20}" \
  --models "$MODELS" --entries "$ROWS" --data_repeats 1 --data_steps 200 --output "$OUT/bench"
# The cost of deterministic ops: the same rows with XLA free to pick its fastest kernels.
XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_deterministic_ops=false" timed benchmark_free \
  "${CAP_BENCH:-240}" $PY scripts/benchmark.py --steps "${BENCH_STEPS:-20}" --models "$MODELS" \
  --entries "$ROWS" --data_repeats 1 --data_steps 200 --output "$OUT/bench_free"
timed gpu_tests "${CAP_TESTS:-240}" $PY -m pytest -q -n "${TEST_PROCS:-6}" -p no:cacheprovider \
  ${TESTS:-tests/test_precision.py tests/test_compression.py tests/test_checkpoint.py tests/test_programs.py tests/test_xla_flags.py}
