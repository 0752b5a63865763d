"""A model and a task of a user's own, outside odsgd_jax, and the config that trains them
(docs/running.md, "Bring your own model and task"); tests/test_byo.py trains it:

  python -m experiments.train --config tests/byo_parity.py:local_sgd --workdir runs/parity

The task: whether an MNIST-1D signal's digit is even. The model scores the ten digits; the
task reads its scores as the log-odds of an even digit against an odd one.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax

from configs import _strategies, default
from odsgd_jax import domains, models, tasks


class ResidualMLP(nn.Module):
  """Dense layers with skip connections; `num_classes` outputs (the data set's classes)."""

  num_classes: int
  width: int = 64
  depth: int = 2

  @nn.compact
  def __call__(self, x, train: bool = False):
    x = nn.Dense(self.width)(x.reshape(x.shape[0], -1))
    for _ in range(self.depth):
      x = x + nn.Dense(self.width)(nn.relu(nn.LayerNorm()(x)))
    return nn.Dense(self.num_classes)(nn.relu(x))


class DigitParity(tasks.Task):
  """Even or odd digit: cross-entropy of the two classes' pooled scores."""

  name = "digit_parity"
  input_key = "image"
  metrics = ("loss", "accuracy")
  target = tasks.Metric("accuracy", higher_is_better=True, unit="points", scale=100.0,
                        margin=0.01, digits=1)  # a study's "similar": within 1 point

  def _parity_logits(self, outputs):  # (even, odd): log-sum-exp of each half's scores
    return jnp.stack([jax.nn.logsumexp(outputs[:, 0::2], -1),
                      jax.nn.logsumexp(outputs[:, 1::2], -1)], -1)

  def _losses(self, outputs, batch):
    return optax.softmax_cross_entropy_with_integer_labels(self._parity_logits(outputs),
                                                           batch["label"] % 2)

  def _correct(self, outputs, batch):
    return jnp.argmax(self._parity_logits(outputs), -1) == batch["label"] % 2

  def loss(self, outputs, batch):
    return self._losses(outputs, batch).mean()

  def train_metrics(self, outputs, batch):
    return {"accuracy": jnp.mean(self._correct(outputs, batch))}

  def eval_sums(self, outputs, batch, mask):
    mask = mask.astype(jnp.float32)
    return {"loss": jnp.sum(self._losses(outputs, batch) * mask),
            "accuracy": jnp.sum(self._correct(outputs, batch) * mask), "count": jnp.sum(mask)}


models.register_model("residual_mlp", ResidualMLP,
                      {"width": domains.integer(1), "depth": domains.integer(0)})
tasks.register_task(DigitParity())


def get_config(arg: str = "ssgd") -> ml_collections.ConfigDict:
  config = default.get_config()
  config.data.task = "digit_parity"
  config.model = ml_collections.ConfigDict({"name": "residual_mlp", "width": 64, "depth": 2})
  config.train.num_steps = 300
  config.train.eval_every = 100
  return _strategies.with_arg(config, arg)
