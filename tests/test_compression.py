"""Compressors: unbiasedness, error feedback, lossless cases, bit counts (4 workers)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import _strategies
from odsgd_jax.train import read_metrics, train_and_evaluate

from odsgd_jax.comm import (Communication, compressed_exchange, exchange, parse_communication,
                            parse_compressor)
from odsgd_jax.comm._compressors import qsgd, randomk

AXIS, N = "w", 4
_rng = np.random.default_rng(0)
TREE = {"kernel": jnp.asarray(_rng.normal(size=(N, 10, 20)), jnp.float32),
        "bias": jnp.asarray(_rng.normal(size=(N, 20)), jnp.float32)}


def _exchange(spec, tree=TREE, key=0):
  compressor = parse_compressor(spec)

  def worker(x):
    mean, own, _, bits = compressor.exchange(x, compressor.init(x), jax.random.PRNGKey(key), AXIS)
    return mean, own, bits

  return jax.vmap(worker, axis_name=AXIS)(tree)


@pytest.mark.parametrize("spec", ["topk:1.0", "cast:float32", "none", "randomk:1.0",
                                  "powersgd:20"])
def test_lossless_settings_are_the_plain_mean(spec):
  mean, _, _ = _exchange(spec)
  for name in TREE:
    np.testing.assert_allclose(mean[name], np.broadcast_to(TREE[name].mean(0), mean[name].shape),
                               atol=1e-5)


@pytest.mark.parametrize("make", [lambda: qsgd(4), lambda: randomk(0.25, rescale=True)])
def test_stochastic_compressors_are_unbiased(make):
  compressor = make()

  def own(key):
    def worker(x):
      return compressor.exchange(x, compressor.init(x), key, AXIS)[1]
    return jax.vmap(worker, axis_name=AXIS)(TREE)

  # 400 draws, one program: each draw's workers share its key, as in a step
  draws = jax.jit(jax.vmap(own))(jax.vmap(jax.random.PRNGKey)(jnp.arange(400)))
  for name in TREE:
    average = np.mean(draws[name], axis=0)
    scale = np.abs(TREE[name]).mean()
    assert np.abs(average - TREE[name]).mean() < 0.1 * scale


@pytest.mark.parametrize("spec,bits", [
    ("none", 220 * 32), ("cast:bfloat16", 220 * 16),
    ("topk:0.1", 20 * 48 + 2 * 48), ("randomk:0.1", 20 * 32 + 2 * 32),  # uint16 indices
    ("qsgd:4", 200 * 4 + 32 + 20 * 4 + 32), ("sign", 200 + 32 + 20 + 32),  # 1 bucket each
    ("powersgd:2", (10 * 2 + 20 * 2) * 32 + 20 * 32),
])
def test_bits_on_the_wire_match_hand_counts(spec, bits):
  assert float(_exchange(spec)[2][0]) == bits


def test_topk_indices_of_a_large_tensor_travel_as_int32():
  x = jnp.asarray(_rng.normal(size=(N, 70_000)), jnp.float32)
  mean, _, bits = _exchange("topk:0.001", x)
  assert float(bits[0]) == 70 * (32 + 32)
  expected = np.zeros((N, 70_000), np.float32)  # every worker's own top 70, summed / N
  for row, values in zip(expected, np.asarray(x), strict=True):
    top = np.argsort(-np.abs(values))[:70]
    row[top] = values[top]
  np.testing.assert_allclose(mean[0], expected.sum(0) / N, atol=1e-6)


def _dgc_reference(steps, ratio, momentum):
  """Deep Gradient Compression's momentum correction, in NumPy, per worker:
  u = m u + g; v = v + u; send top-k of v; v, u = 0 where sent; mean of the sent."""
  u = np.zeros_like(steps[0])
  v = np.zeros_like(steps[0])
  means = []
  for g in steps:
    u = momentum * u + g
    v = v + u
    sent = np.zeros_like(v)
    k = int(np.ceil(ratio * v.shape[1]))
    for worker in range(v.shape[0]):
      top = np.argsort(-np.abs(v[worker]))[:k]
      sent[worker, top] = v[worker, top]
    v = v - sent
    u = np.where(sent != 0, 0.0, u)
    means.append(sent.mean(0))
  return means


def _means_over_steps(communication, steps):
  """The mean each exchange delivers, one exchange per entry of `steps` (N workers)."""

  def worker(*xs):
    state = communication.init(xs[0])
    means = []
    for x in xs:
      mean, state = exchange(communication, x, state, AXIS)
      means.append(mean)
    return means

  return jax.vmap(worker, axis_name=AXIS)(*[jnp.asarray(g) for g in steps])


def test_momentum_correction_matches_numpy_dgc():
  steps = [np.asarray(_rng.normal(size=(N, 50)), np.float32) for _ in range(5)]
  communication = parse_communication("topk:0.1,momentum=0.9")
  assert communication.momentum == 0.9 and communication.uses_error_feedback
  means = _means_over_steps(communication, steps)
  for got, expected in zip(means, _dgc_reference(steps, 0.1, 0.9), strict=True):
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)


def test_momentum_correction_warmup_is_momentum_sgd():
  """Dense warm-up exchanges send the whole velocity and keep it: the mean is the
  heavy-ball buffer of the mean gradient."""
  steps = [np.asarray(_rng.normal(size=(N, 30)), np.float32) for _ in range(4)]
  communication = parse_communication("topk:0.1,momentum=0.5,warmup=4")
  means = _means_over_steps(communication, steps)
  buffer = np.zeros(30, np.float32)
  for got, g in zip(means, steps, strict=True):
    buffer = 0.5 * buffer + g.mean(0)
    np.testing.assert_allclose(got[0], buffer, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec", ["topk:0.05", "sign", "qsgd:2", "powersgd:1"])
def test_error_feedback_sends_everything_eventually(spec):
  """sum of what was sent + the residual == sum of what was to be sent (per worker)."""
  communication = Communication(parse_compressor(spec), error_feedback=True)
  steps = [jax.tree.map(lambda x, s=s: x * (1 + 0.1 * s), TREE) for s in range(6)]

  def worker(*xs):
    state = communication.init(xs[0])
    sent = jax.tree.map(jnp.zeros_like, xs[0])
    for x in xs:
      _, own, state = compressed_exchange(communication, x, state, AXIS,
                                          key=jax.random.PRNGKey(1))
      sent = jax.tree.map(jnp.add, sent, own)
    return sent, state.error

  sent, residual = jax.vmap(worker, axis_name=AXIS)(*steps)
  total = jax.tree.map(lambda *xs: sum(xs), *steps)
  for name in TREE:
    np.testing.assert_allclose(sent[name] + residual[name], total[name], atol=1e-4)
  assert np.abs(residual["kernel"]).max() > 0  # something was really held back


def test_unknown_compressor_is_named():
  with pytest.raises(ValueError, match="unknown compressor 'zip'"):
    parse_compressor("zip:2")


def test_every_tick_reports_what_it_sent_including_dense_warmups(small_config, tmp_path):
  """The compression's dense warm-up counts the full model, later ticks the compressed
  message, odsgd's synchronous warm-up included (its all-reduce is compressed too)."""
  config = _strategies.use_strategy(small_config, "odsgd")
  config.strategy.warmup_steps = 5
  config.strategy.compression = "topk:0.01,warmup=3"
  summary = train_and_evaluate(config, str(tmp_path / "run"))
  bits = [r["bits_sent"] for r in read_metrics(str(tmp_path / "run")) if "loss" in r]
  dense = summary["sim_message_bytes"] * 8
  assert bits[:3] == [dense] * 3
  assert all(0 < b < dense / 20 for b in bits[3:])


# Every strategy reaches the wire through the one exchange (`odsgd_jax.comm.exchange`), so
# a run of each compressor and of each strategy, paired, covers the compositions: what a
# strategy hands the exchange (gradients, deltas, pending updates) is the same for every
# compressor. (Resume of compressed state: test_train.py; bits per tick: above.)
@pytest.mark.parametrize("strategy,spec", [
    ("odsgd", "topk:0.05"), ("local_sgd", "randomk:0.1"), ("ssgd", "qsgd:8"),
    ("pseudo_sync", "sign"), ("oscars", "powersgd:2"), ("asgd", "cast:bfloat16"),
    ("ssp", "topk:0.05,warmup=2")])
def test_every_compressor_and_every_strategy_compose(small_config, tmp_path, strategy, spec):
  config = _strategies.use_strategy(small_config, strategy)
  if strategy == "odsgd":
    config.strategy.warmup_steps = 2
  config.strategy.compression = spec
  config.train.num_steps = 8
  config.train.eval_every = config.train.checkpoint_every = 8
  summary = train_and_evaluate(config, str(tmp_path / "run"))
  bits = [r["bits_sent"] for r in read_metrics(str(tmp_path / "run")) if "bits_sent" in r]
  dense = summary["sim_message_bytes"] * 8
  assert summary["steps"] == 8 and np.isfinite(summary["test_loss"])
  assert 0 < max(bits) and min(b for b in bits if b > 0) < dense  # something compressed went out
