"""The tasks (odsgd_jax.tasks): each one's loss and metrics against NumPy, and what a task
must declare."""

import numpy as np
import pytest

from odsgd_jax.tasks import TASKS, Classification, Metric, NextToken, Task, register_task


def _log_softmax(logits):
  shifted = logits - logits.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_classification_matches_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(6, 5)).astype(np.float32)
  labels = np.array([0, 4, 2, 2, 1, 3])
  mask = np.array([1, 1, 1, 1, 0, 0], bool)
  batch = {"image": np.zeros((6, 3), np.float32), "label": labels}
  task = Classification()
  losses = -_log_softmax(logits.astype(np.float64))[np.arange(6), labels]
  np.testing.assert_allclose(task.loss(logits, batch), losses.mean(), rtol=1e-6)
  np.testing.assert_allclose(task.train_metrics(logits, batch)["accuracy"],
                             np.mean(logits.argmax(-1) == labels), rtol=1e-6)
  sums = task.eval_sums(logits, batch, mask)
  np.testing.assert_allclose(sums["loss"], losses[:4].sum(), rtol=1e-6)
  assert float(sums["accuracy"]) == np.sum((logits.argmax(-1) == labels)[:4])
  assert float(sums["count"]) == 4
  assert task.target == Metric("accuracy", higher_is_better=True, unit="points", scale=100.0,
                              margin=0.01, digits=1)


def test_next_token_reads_the_first_t_tokens_and_predicts_each_next_one():
  rng = np.random.default_rng(1)
  tokens = rng.integers(0, 7, size=(3, 5))  # T + 1 = 5
  task = NextToken()
  inputs = np.asarray(task.inputs({"tokens": tokens}))
  np.testing.assert_array_equal(inputs, tokens[:, :-1])
  logits = rng.normal(size=(3, 4, 7)).astype(np.float32)
  targets = tokens[:, 1:]
  log_p = _log_softmax(logits.astype(np.float64))
  losses = -np.take_along_axis(log_p, targets[..., None], -1)[..., 0]  # (3, 4)
  np.testing.assert_allclose(task.loss(logits, {"tokens": tokens}), losses.mean(), rtol=1e-6)
  mask = np.array([1, 0, 1], bool)
  sums = task.eval_sums(logits, {"tokens": tokens}, mask)
  np.testing.assert_allclose(sums["loss"], losses[[0, 2]].sum(), rtol=1e-6)
  assert float(sums["count"]) == 8  # two sequences of four predicted tokens
  assert float(sums["accuracy"]) == np.sum((logits.argmax(-1) == targets)[[0, 2]])
  assert task.target.name == "loss" and not task.target.higher_is_better
  assert task.example_input((4,)).dtype == np.int32


def test_a_task_must_name_itself_and_target_one_of_its_metrics():
  class Nameless(Task):
    pass

  class Misdirected(Task):
    name = "misdirected"
    metrics = ("loss",)
    target = Metric("accuracy", higher_is_better=True, unit="points")

  with pytest.raises(ValueError, match="no name"):
    register_task(Nameless())
  with pytest.raises(ValueError, match="not one of its metrics"):
    register_task(Misdirected())
  assert set(TASKS) >= {"classification", "next_token"}

