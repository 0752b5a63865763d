"""Small shared helpers for the tests."""

import os

import jax
import numpy as np
import orbax.checkpoint as ocp


def assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6):
  actual_leaves, actual_def = jax.tree.flatten(actual)
  expected_leaves, expected_def = jax.tree.flatten(expected)
  assert actual_def == expected_def, f"{actual_def} != {expected_def}"
  for a, e in zip(actual_leaves, expected_leaves, strict=True):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(e, np.float64),
                               rtol=rtol, atol=atol)


def assert_trees_equal(actual, expected):
  actual_leaves, actual_def = jax.tree.flatten(actual)
  expected_leaves, expected_def = jax.tree.flatten(expected)
  assert actual_def == expected_def, f"{actual_def} != {expected_def}"
  for a, e in zip(actual_leaves, expected_leaves, strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


def saved_state(workdir: str, step: int):
  """The train state saved at `step`, as NumPy arrays in nested dicts/lists."""
  path = os.path.join(os.path.abspath(workdir), "checkpoints", str(step), "state")
  with ocp.StandardCheckpointer() as checkpointer:
    return checkpointer.restore(path)
