"""Every strategy equals its independent NumPy reference (tests/numpy_reference.py).

N=4 workers, 12 ticks of linear least squares (each worker its own batches),
SGD, momentum and Adam inner optimizers, homogeneous and heterogeneous schedules;
every worker's parameters are compared after every tick: max |diff| <= 1e-5.
"""

import jax
import numpy as np
import optax
import pytest

from odsgd_jax import parallel
from odsgd_jax.strategies import STRATEGIES
from tests import numpy_reference as ref
from tests.least_squares import (DIM, N, T, X0, heterogeneous_schedules, homogeneous_schedules,
                                 numpy_grad, run_jax)

TOLERANCE = 1e-5

INNERS = {
    "sgd": (lambda: optax.sgd(0.1), lambda: ref.SGD(0.1)),
    "momentum": (lambda: optax.sgd(0.05, momentum=0.9), lambda: ref.SGD(0.05, momentum=0.9)),
    # adaptive: the moments each strategy keeps (per worker, or the server's) and what a
    # replay or a prediction runs them through (docs/strategies.md, "With an adaptive
    # inner optimizer")
    "adam": (lambda: optax.adam(0.01), lambda: ref.Adam(0.01)),
}

def test_every_strategy_has_a_reference_case():
  assert {case.strategy for case in ref.CASES.values()} >= set(STRATEGIES)


@pytest.mark.parametrize("inner_name", sorted(INNERS))
@pytest.mark.parametrize("case", sorted(ref.CASES))
def test_matches_numpy_reference(case, inner_name):
  name, options, reference, schedule_kind = ref.CASES[case]
  schedules = (heterogeneous_schedules(seed=len(case)) if schedule_kind == "heterogeneous"
               else homogeneous_schedules())
  make_jax_inner, make_numpy_inner = INNERS[inner_name]
  expected_history, expected_model = reference((numpy_grad, X0, N, T), make_numpy_inner(),
                                               schedules)
  history, model = run_jax(name, make_jax_inner(), schedules, **options)
  assert history.shape == (T, N, DIM)
  np.testing.assert_allclose(history, expected_history, rtol=0, atol=TOLERANCE)
  np.testing.assert_allclose(model, expected_model, rtol=0, atol=TOLERANCE)
  assert np.abs(expected_history[-1] - X0).max() > 1e-2, "the run must move the parameters"


@pytest.mark.parametrize("confidence", ["adaptive", "fixed"])
def test_only_the_adaptive_confidence_tracks_the_prediction_error(confidence):
  """A fixed confidence uses no tracking signal, so its tick takes no sums over the error
  (a pass over the model; scripts/benchmark.py): its sums stay 0, the adaptive ones move."""
  tx = STRATEGIES["pseudo_sync"].make(optax.sgd(0.1), axis_name=parallel.WORKER_AXES[0],
                                      confidence=confidence)
  params = np.zeros((2, DIM), np.float32)
  state = jax.vmap(tx.init)(params)
  step = jax.vmap(tx.update, axis_name=parallel.WORKER_AXES[0])
  for tick in range(4):
    grads = np.stack([np.full(DIM, tick + 1.0), np.full(DIM, -2.0 * tick)]).astype(np.float32)
    _, state = step(grads, state, params)
  tracked = np.abs(np.asarray(state.abs_error_sum)).max() > 0
  assert tracked == (confidence == "adaptive")
