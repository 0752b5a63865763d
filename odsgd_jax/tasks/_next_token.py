"""Next-token prediction: a sequence of T + 1 token ids per example; the model reads the
first T and predicts each next one. Cross-entropy per token (nats), and the loss as the
target (lower is better)."""

import jax.numpy as jnp
import numpy as np
import optax

from odsgd_jax.tasks._task import Metric, Task


class NextToken(Task):
  name = "next_token"
  input_key = "tokens"
  input_dtype = jnp.int32
  metrics = ("loss", "accuracy")  # accuracy: the next token ranked first
  # "similar": within 0.05 nats per token of the baseline's loss, about 5% in perplexity
  # (docs/results.md, "The language model's Results table"; fixed before its runs)
  target = Metric("loss", higher_is_better=False, unit="nats", margin=0.05, digits=3)

  def inputs(self, batch):
    return batch["tokens"][:, :-1]

  def example_batch(self, input_shape, leading):
    # the model reads T tokens; an example holds T + 1
    return {"tokens": np.zeros((*leading, input_shape[0] + 1), np.int32)}

  def _token_losses(self, outputs, batch):
    return optax.softmax_cross_entropy_with_integer_labels(outputs, batch["tokens"][:, 1:])

  def loss(self, outputs, batch):
    return self._token_losses(outputs, batch).mean()

  def train_metrics(self, outputs, batch):
    return {"accuracy": jnp.mean(jnp.argmax(outputs, -1) == batch["tokens"][:, 1:])}

  def eval_sums(self, outputs, batch, mask):
    weights = jnp.broadcast_to(mask.astype(jnp.float32)[:, None], outputs.shape[:2])
    correct = jnp.argmax(outputs, -1) == batch["tokens"][:, 1:]
    return {"loss": jnp.sum(self._token_losses(outputs, batch) * weights),
            "accuracy": jnp.sum(correct * weights), "count": jnp.sum(weights)}
