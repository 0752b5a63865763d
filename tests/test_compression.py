"""Compressors: unbiasedness, error feedback, lossless cases, bit counts (4 workers)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import _strategies
from odsgd_jax.train import read_metrics, train_and_evaluate

from odsgd_jax.strategies._compression import (compressed_mean, init_communication,
                                               parse_compressor, qsgd, randomk)

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
      return compressor.exchange(x, compressor.init(x), jax.random.PRNGKey(key), AXIS)[1]
    return jax.vmap(worker, axis_name=AXIS)(TREE)

  draws = [own(k) for k in range(400)]
  for name in TREE:
    average = np.mean([d[name] for d in draws], axis=0)
    scale = np.abs(TREE[name]).mean()
    assert np.abs(average - TREE[name]).mean() < 0.1 * scale


@pytest.mark.parametrize("spec,bits", [
    ("none", 220 * 32), ("cast:bfloat16", 220 * 16),
    ("topk:0.1", 20 * 64 + 2 * 64), ("randomk:0.1", 20 * 32 + 2 * 32),
    ("qsgd:4", 200 * 4 + 32 + 20 * 4 + 32), ("sign", 200 + 32 + 20 + 32),  # 1 bucket each
    ("powersgd:2", (10 * 2 + 20 * 2) * 32 + 20 * 32),
])
def test_bits_on_the_wire_match_hand_counts(spec, bits):
  assert float(_exchange(spec)[2][0]) == bits


@pytest.mark.parametrize("spec", ["topk:0.05", "sign", "qsgd:2", "powersgd:1"])
def test_error_feedback_sends_everything_eventually(spec):  # compressed_mean forces it on
  """sum of what was sent + the residual == sum of what was to be sent (per worker)."""
  compressor = parse_compressor(spec)
  steps = [jax.tree.map(lambda x, s=s: x * (1 + 0.1 * s), TREE) for s in range(6)]

  def worker(*xs):
    state = init_communication(compressor, xs[0])
    sent = jax.tree.map(jnp.zeros_like, xs[0])
    for x in xs:
      corrected = jax.tree.map(jnp.add, x, state.error)
      key = jax.random.fold_in(jax.random.PRNGKey(1), state.count)  # as compressed_mean does
      _, own, _, _ = compressor.exchange(corrected, state.compressor_state, key, AXIS)
      _, _, state = compressed_mean(x, state, compressor, AXIS, key=jax.random.PRNGKey(1))
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
  """odsgd's synchronous warm-up is dense: its ticks count the full model, later ticks
  the compressed message; the clock charges less for the latter."""
  config = _strategies.use_strategy(small_config, "odsgd")
  config.strategy.warmup_steps = 5
  config.strategy.compression = "topk:0.01"
  summary = train_and_evaluate(config, str(tmp_path / "run"))
  bits = [r["bits_sent"] for r in read_metrics(str(tmp_path / "run")) if "loss" in r]
  dense = summary["sim_message_bytes"] * 8
  assert bits[:5] == [dense] * 5
  assert all(0 < b < dense / 20 for b in bits[6:])


@pytest.mark.parametrize("strategy", ["ssgd", "odsgd", "local_sgd"])
@pytest.mark.parametrize("spec", ["topk:0.05", "randomk:0.1", "qsgd:8", "sign", "powersgd:2",
                                  "cast:bfloat16"])
def test_every_compressor_composes_with_the_strategies(small_config, tmp_path, strategy, spec):
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
