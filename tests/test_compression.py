"""Compressors: unbiasedness, error feedback, lossless cases, bit counts (4 workers)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from odsgd_jax.strategies._compression import (compressed_mean, init_communication,
                                               parse_compressor)

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


@pytest.mark.parametrize("spec", ["qsgd:4", "randomk:0.25"])
def test_stochastic_compressors_are_unbiased(spec):
  draws = [_exchange(spec, key=k)[1] for k in range(400)]
  for name in TREE:
    average = np.mean([d[name] for d in draws], axis=0)
    scale = np.abs(TREE[name]).mean()
    assert np.abs(average - TREE[name]).mean() < 0.1 * scale


@pytest.mark.parametrize("spec,bits", [
    ("none", 220 * 32), ("cast:bfloat16", 220 * 16),
    ("topk:0.1", 20 * 64 + 2 * 64), ("randomk:0.1", 20 * 32 + 2 * 32),
    ("qsgd:4", 200 * 4 + 32 + 20 * 4 + 32), ("sign", 200 + 32 + 20 + 32),
    ("powersgd:2", (10 * 2 + 20 * 2) * 32 + 20 * 32),
])
def test_bits_on_the_wire_match_hand_counts(spec, bits):
  assert float(_exchange(spec)[2][0]) == bits


@pytest.mark.parametrize("spec", ["topk:0.05", "sign", "qsgd:2", "powersgd:1"])
def test_error_feedback_sends_everything_eventually(spec):
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
      _, state = compressed_mean(x, state, compressor, AXIS, key=jax.random.PRNGKey(1))
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
