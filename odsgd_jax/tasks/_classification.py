"""Classification: an input and an integer label; cross-entropy, and accuracy as the
target."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from odsgd_jax.tasks._task import Metric, Task


class Classification(Task):
  name = "classification"
  input_key = "image"
  metrics = ("loss", "accuracy")
  # "similar": within 1 point of the baseline's accuracy (docs/results.md)
  target = Metric("accuracy", higher_is_better=True, unit="points", scale=100.0, margin=0.01,
                  digits=1)

  def example_batch(self, input_shape, leading):
    return {"image": np.zeros((*leading, *input_shape), np.float32),
            "label": np.zeros(leading, np.int32)}

  def loss(self, outputs: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(outputs, batch["label"]).mean()

  def train_metrics(self, outputs, batch):
    return {"accuracy": jnp.mean(jnp.argmax(outputs, -1) == batch["label"])}

  def eval_sums(self, outputs, batch, mask):
    mask = mask.astype(jnp.float32)
    losses = optax.softmax_cross_entropy_with_integer_labels(outputs, batch["label"])
    return {"loss": jnp.sum(losses * mask),
            "accuracy": jnp.sum((jnp.argmax(outputs, -1) == batch["label"]) * mask),
            "count": jnp.sum(mask)}
