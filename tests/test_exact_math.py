"""Every strategy equals its independent NumPy reference (tests/numpy_reference.py).

N=4 workers, 12 ticks of linear least squares (each worker its own batches),
SGD and momentum inner optimizers, homogeneous and heterogeneous schedules;
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
}

# (strategy, options, NumPy reference call, schedules)
CASES = {
    "ssgd": ("ssgd", {}, lambda inner, sch: ref.ssgd(numpy_grad, X0, N, T, inner), "homogeneous"),
    "asgd": ("asgd", {}, lambda inner, sch: ref.asgd(numpy_grad, X0, N, T, inner, sch),
             "heterogeneous"),
    "asgd_homogeneous": ("asgd", {}, lambda inner, sch: ref.asgd(numpy_grad, X0, N, T, inner, sch),
                         "homogeneous"),
    "dc_asgd": ("asgd", {"delay_compensation": 0.5},
                lambda inner, sch: ref.asgd(numpy_grad, X0, N, T, inner, sch,
                                            delay_compensation=0.5), "heterogeneous"),
    "asgd_spike": ("asgd", {"correction": "spike", "inner_momentum": 0.8},
                   lambda inner, sch: ref.asgd(numpy_grad, X0, N, T, inner, sch,
                                               correction="spike", inner_momentum=0.8),
                   "heterogeneous"),
    "asgd_predict_dc": ("asgd", {"correction": "predict", "delay_compensation": 0.5},
                        lambda inner, sch: ref.asgd(numpy_grad, X0, N, T, inner, sch,
                                                    delay_compensation=0.5, correction="predict"),
                        "heterogeneous"),
    "ssp": ("ssp", {"staleness": 1},
            lambda inner, sch: ref.ssp(numpy_grad, X0, N, T, inner, sch, staleness=1),
            "heterogeneous"),
    "ssp_bsp": ("ssp", {"staleness": 0},
                lambda inner, sch: ref.ssp(numpy_grad, X0, N, T, inner, sch, staleness=0),
                "heterogeneous"),
    "odsgd_sgd": ("odsgd", {"local_lr": 0.05, "warmup_steps": 3},
                  lambda inner, sch: ref.odsgd(numpy_grad, X0, N, T, inner, 0.05, warmup_steps=3),
                  "homogeneous"),
    "odsgd_momentum": ("odsgd", {"local_lr": 0.05, "local_optimizer": "momentum",
                                 "warmup_steps": 0, "local_weight_decay": 0.01},
                       lambda inner, sch: ref.odsgd(numpy_grad, X0, N, T, inner, 0.05, "momentum",
                                                    0, local_weight_decay=0.01), "homogeneous"),
    "odsgd_dcasgd": ("odsgd", {"local_lr": 0.05, "local_optimizer": "dcasgd", "warmup_steps": 2,
                               "dc_lambda": 2.0},
                     lambda inner, sch: ref.odsgd(numpy_grad, X0, N, T, inner, 0.05, "dcasgd", 2,
                                                  dc_lambda=2.0), "homogeneous"),
    "odsgd_replay": ("odsgd", {"local_lr": 0.0, "local_optimizer": "replay", "warmup_steps": 2},
                     lambda inner, sch: ref.odsgd(numpy_grad, X0, N, T, inner, 0.0, "replay", 2),
                     "homogeneous"),
    "odsgd_replay_spike": ("odsgd", {"local_lr": 0.0, "local_optimizer": "replay",
                                     "warmup_steps": 2, "correction": "spike"},
                           lambda inner, sch: ref.odsgd(numpy_grad, X0, N, T, inner, 0.0,
                                                        "replay", 2, correction="spike"),
                           "homogeneous"),
    "odsgd_dcasgd_predict_spike": (
        "odsgd", {"local_lr": 0.05, "local_optimizer": "dcasgd", "warmup_steps": 2,
                  "correction": "predict+spike", "inner_momentum": 0.7},
        lambda inner, sch: ref.odsgd(numpy_grad, X0, N, T, inner, 0.05, "dcasgd", 2,
                                     correction="predict+spike", inner_momentum=0.7),
        "homogeneous"),
    "pseudo_sync": ("pseudo_sync", {},
                    lambda inner, sch: ref.pseudo_sync(numpy_grad, X0, N, T, inner),
                    "homogeneous"),
    "pseudo_sync_fixed": ("pseudo_sync", {"confidence": "fixed", "alpha": 0.3},
                          lambda inner, sch: ref.pseudo_sync(numpy_grad, X0, N, T, inner, "fixed",
                                                             alpha=0.3), "homogeneous"),
    "pseudo_sync_predict_spike": ("pseudo_sync", {"correction": "predict+spike"},
                                  lambda inner, sch: ref.pseudo_sync(
                                      numpy_grad, X0, N, T, inner, correction="predict+spike"),
                                  "homogeneous"),
    "pseudo_sync_replay": ("pseudo_sync", {"confidence": "fixed", "alpha": 0.6,
                                           "correction": "replay"},
                           lambda inner, sch: ref.pseudo_sync(numpy_grad, X0, N, T, inner,
                                                              "fixed", alpha=0.6,
                                                              correction="replay"),
                           "homogeneous"),
    "pseudo_sync_replay_spike": ("pseudo_sync", {"correction": "replay+spike",
                                                 "inner_momentum": 0.8},
                                 lambda inner, sch: ref.pseudo_sync(
                                     numpy_grad, X0, N, T, inner, correction="replay+spike",
                                     inner_momentum=0.8), "homogeneous"),
    "local_sgd": ("local_sgd", {"period": 3},
                  lambda inner, sch: ref.local_sgd(numpy_grad, X0, N, T, inner, 3),
                  "homogeneous"),
    "local_sgd_diloco": ("local_sgd", {"period": 4, "average_inner_state": True,
                                       "outer": optax.sgd(0.7, momentum=0.9, nesterov=True)},
                         lambda inner, sch: ref.local_sgd(
                             numpy_grad, X0, N, T, inner, 4, average_inner_state=True,
                             outer=ref.SGD(0.7, momentum=0.9, nesterov=True)), "homogeneous"),
    "oscars_fixed": ("oscars", {"period": 3},
                     lambda inner, sch: ref.local_sgd(numpy_grad, X0, N, T, inner, 3, sch,
                                                      weighted=True), "heterogeneous"),
    "oscars_linear": ("oscars", {"period": 2, "adapt": "linear"},
                      lambda inner, sch: ref.local_sgd(numpy_grad, X0, N, T, inner, 2, sch,
                                                       weighted=True, adapt="linear"),
                      "heterogeneous"),
    "oscars_loss": ("oscars", {"period": 4, "adapt": "loss"},
                    lambda inner, sch: ref.local_sgd(numpy_grad, X0, N, T, inner, 4, sch,
                                                     weighted=True, adapt="loss"),
                    "heterogeneous"),
}


def test_every_strategy_has_a_reference_case():
  assert {case[0] for case in CASES.values()} == set(STRATEGIES)


@pytest.mark.parametrize("inner_name", sorted(INNERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_numpy_reference(case, inner_name):
  name, options, reference, schedule_kind = CASES[case]
  schedules = (heterogeneous_schedules(seed=len(case)) if schedule_kind == "heterogeneous"
               else homogeneous_schedules())
  make_jax_inner, make_numpy_inner = INNERS[inner_name]
  expected_history, expected_model = reference(make_numpy_inner(), schedules)
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
