"""The clock's validated terms against hand-computed timelines, and the validation itself.

Each term (achieved bandwidth, a sharded parameter server, node contention, interference
of overlapped communication, backward-order buckets, default noise) is checked on a tiny
case worked out by hand; then the published-measurement validation (docs/clock.md): its
fitted constants are what the fit gives, and the held-out rows meet the target.
"""

import numpy as np
import pytest

from configs import default
from odsgd_jax import cluster
from odsgd_jax.cluster import (Network, Overlap, PipelinedTimeline, SynchronousTimeline,
                               Workers, calibration)
from odsgd_jax.models import gradient_profile
from odsgd_jax.study import clock_validation as cv


def test_achieved_bandwidth_is_line_rate_times_the_transports_share():
  line = Network(bandwidth=1e9)
  half = Network(bandwidth=1e9, efficiency=0.5)
  assert half.allreduce_time(4, 1e6) == pytest.approx(2 * 3 / 4 * 1e6 / 5e8)
  assert half.allreduce_time(4, 1e6) == pytest.approx(2 * line.allreduce_time(4, 1e6))
  assert half.message_time(1e6) == pytest.approx(2e-3)
  inside = Network(bandwidth=1e9, topology="hierarchical", intra_bandwidth=1e10,
                   workers_per_node=4, intra_efficiency=0.25, efficiency=0.5)
  # 8 workers: a ring of 4 at 2.5 GB/s, then a ring of 2 nodes at 0.5 GB/s
  assert inside.allreduce_time(8, 1e6) == pytest.approx(2 * 3 / 4 * 1e6 / 2.5e9 + 1e6 / 5e8)


def test_a_sharded_parameter_server_divides_the_servers_load():
  one = Network(bandwidth=1e9, latency=1e-5, topology="ps")
  four = Network(bandwidth=1e9, latency=1e-5, topology="ps", servers=4)
  many = Network(bandwidth=1e9, latency=1e-5, topology="ps", servers=16)
  assert one.allreduce_time(8, 1e6) == pytest.approx(8e-3 + 1e-5)
  assert four.allreduce_time(8, 1e6) == pytest.approx(2e-3 + 1e-5)
  assert many.allreduce_time(8, 1e6) == pytest.approx(1e-3 + 1e-5)  # a worker's own link
  across = Network(bandwidth=1e9, topology="hierarchical", intra_bandwidth=1e10,
                   workers_per_node=4, inter_topology="ps", servers=2)
  # 16 workers: a ring of 4 inside, then 4 nodes pushing to 2 shards: 2 S/B
  assert across.allreduce_time(16, 1e6) == pytest.approx(2 * 3 / 4 * 1e6 / 1e10 + 2e-3)


def test_colocated_shards_share_the_workers_links():
  # 8 nodes, 4 of them also hold a shard of S/4: such a node takes 7 other workers'
  # S/4 pushes and sends its own S to the 3 other shards (3 S/4): 2.5 S on its link
  four = Network(bandwidth=1e9, latency=1e-5, topology="ps", servers=4, colocated=True)
  assert four.allreduce_time(8, 1e6) == pytest.approx(2.5e-3 + 1e-5)
  # one shard per node: 7 S/8 in and 7 S/8 out, 1.75 S; a lone shard: 7 pushes of S
  every = Network(bandwidth=1e9, topology="ps", servers=8, colocated=True)
  assert every.allreduce_time(8, 1e6) == pytest.approx(1.75e-3)
  alone = Network(bandwidth=1e9, topology="ps", servers=1, colocated=True)
  assert alone.allreduce_time(8, 1e6) == pytest.approx(7e-3)
  more = Network(bandwidth=1e9, topology="ps", servers=16, colocated=True)
  assert more.allreduce_time(8, 1e6) == pytest.approx(every.allreduce_time(8, 1e6))


def test_uneven_shards_load_the_busiest_one():
  # 8 workers, 4 shards, the busiest holding half the bytes: its link takes 8 x S/2
  half = Network(bandwidth=1e9, latency=1e-5, topology="ps", servers=4, shard_share=0.5)
  assert half.allreduce_time(8, 1e6) == pytest.approx(4e-3 + 1e-5)
  # colocated on 8 nodes: 7 other workers' pushes of S/2 in, its own S/2 to the other
  # shards: 1 + 6/2 = 4 S
  near = Network(bandwidth=1e9, topology="ps", servers=4, colocated=True, shard_share=0.5)
  assert near.allreduce_time(8, 1e6) == pytest.approx(4e-3)
  even = Network(bandwidth=1e9, topology="ps", servers=4, colocated=True, shard_share=0.25)
  assert even.allreduce_time(8, 1e6) == pytest.approx(
      Network(bandwidth=1e9, topology="ps", servers=4, colocated=True).allreduce_time(8, 1e6))
  with pytest.raises(ValueError, match=r"shard_share must be in \[1/servers, 1\]"):
    Network(bandwidth=1e9, topology="ps", servers=4, shard_share=0.2)


def test_round_robin_placement_of_tensorflow_variables():
  # variables of 4, 1, 4, 1, 2 bytes dealt to 2 shards in turn: 4 + 4 + 2 and 1 + 1
  assert cv.round_robin_share((4, 1, 4, 1, 2), 2) == pytest.approx(10 / 12)
  assert cv.round_robin_share((4, 1, 4, 1, 2), 1) == 1.0
  # TensorFlow's ResNet-50: the global step, kernel, beta and gamma per convolution, the
  # classifier's weights and biases: the flax model's 25.6M parameters
  variables = cv.tf_variables("resnet50")
  assert len(variables) == 1 + 53 * 3 + 2
  assert sum(variables[1:]) == pytest.approx(cv.message_bytes("resnet50"))
  # Inception V3 (kernel, beta per convolution): kernels only on the even shards
  assert cv.round_robin_share(cv.tf_variables("inception_v3"), 6) == pytest.approx(1 / 3,
                                                                                    abs=0.01)


def test_node_contention_costs_each_worker_its_neighbours_samples():
  workers = Workers((1.0,) * 4, 0.1, node_size=4, node_contention=1e-3, samples_per_step=10)
  np.testing.assert_allclose(workers.compute_times(0), 0.1 + 1e-3 * 10 * 3)
  two = Workers((1.0,) * 2, 0.1, node_size=4, node_contention=1e-3, samples_per_step=10)
  np.testing.assert_allclose(two.compute_times(0), 0.1 + 1e-3 * 10)  # one neighbour
  alone = Workers((1.0,), 0.1, node_size=4, node_contention=1e-3, samples_per_step=10)
  np.testing.assert_allclose(alone.compute_times(0), 0.1)


def test_buckets_follow_the_backward_order_of_the_gradients():
  overlap = Overlap(bucket_bytes=100, gradients=((60, 0.1), (60, 0.2), (60, 0.9)))
  assert overlap.buckets(180) == [(60, 0.1), (60, 0.2), (60, 0.9)]
  wider = Overlap(bucket_bytes=150, gradients=((60, 0.1), (60, 0.2), (60, 0.9)))
  assert wider.buckets(180) == [(120, 0.2), (60, 0.9)]
  # another message size (a compressed one) scales every gradient alike
  assert overlap.buckets(360) == [(120, 0.1), (120, 0.2), (120, 0.9)]
  assert overlap.buckets(90) == [(90, 0.9)]
  even = Overlap(bucket_bytes=100)
  assert even.buckets(250) == [(100, 0.4), (100, 0.8), (50, 1.0)]


def _two_bucket_tick(interference: float, bandwidth: float) -> float:
  # 2 workers, compute 1 s, backward half of it; buckets of 100 B ready at 0.5 and 1.0 of
  # the backward pass, i.e. at 0.75 s and 1.0 s; a 2-worker ring moves 100 B in 100/B s.
  workers = Workers((1.0, 1.0), 1.0, interference=interference)
  overlap = Overlap(backward_share=0.5, bucket_bytes=100,
                    gradients=((100, 0.5), (100, 1.0)))
  timeline = SynchronousTimeline(workers, Network(bandwidth=bandwidth), 200, overlap)
  return timeline.cost(0).duration


def test_interference_delays_the_compute_by_the_overlapped_communication():
  # 0.05 s per bucket: the first runs 0.75-0.80 beside the compute, the second 1.00-1.05.
  assert _two_bucket_tick(0.0, 2000) == pytest.approx(1.05)
  assert _two_bucket_tick(2.0, 2000) == pytest.approx(1.0 + 2.0 * 0.05)  # compute ends last
  # 0.5 s per bucket: 0.75-1.25 (0.25 s beside the compute), then 1.25-1.75.
  assert _two_bucket_tick(0.4, 200) == pytest.approx(1.75)
  pipelined = PipelinedTimeline(Workers((1.0, 1.0), 1.0, interference=0.2),
                                Network(bandwidth=200), 100)
  assert pipelined.cost(0).duration == pytest.approx(1.0 + 0.2 * 0.5)  # 0.5 s beside


def test_runs_use_the_validated_terms_by_default_and_the_old_clock_by_options():
  config = default.get_config()
  assert config.cluster.jitter == calibration.NOISE.value > 0
  spec = cluster.from_config(config.cluster, 0.01, samples_per_step=16)
  assert spec.workers.interference == calibration.INTERFERENCE.value > 0
  assert spec.workers.node_contention == calibration.NODE_CONTENTION.value > 0
  assert len(set(spec.workers.compute_times(0))) == config.cluster.num_workers  # noisy
  config.cluster.preset = "10gbe"
  assert cluster.from_config(config.cluster, 0.01).network.efficiency == (
      calibration.TRANSPORTS["tcp"].value)
  for field, value in (("jitter", 0.0), ("interference", 0.0), ("node_contention", 0.0),
                       ("transport", "line_rate")):
    config.cluster[field] = value
  old = cluster.from_config(config.cluster, 0.01, samples_per_step=16)
  np.testing.assert_allclose(old.workers.compute_times(3), 0.01)
  assert old.network.allreduce_time(8, 1e6) == pytest.approx(
      2 * 7 / 8 * 1e6 / 1.25e9 + 2 * 3 * 20e-6)  # 10 GbE line rate, tree latency


def test_gradient_profiles_hold_the_models_parameters_in_backward_order():
  vgg = gradient_profile("vgg16", (224, 224, 3))
  assert sum(size for size, _ in vgg) == 138_357_544 * 4
  assert vgg[-1][1] == 1.0 and all(a[1] <= b[1] for a, b in zip(vgg, vgg[1:], strict=False))
  # the fully connected layers (~90% of the bytes) are ready within 1% of the backward pass
  assert sum(size for size, ready in vgg if ready <= 0.01) / sum(s for s, _ in vgg) > 0.85
  resnet = gradient_profile("resnet50", (224, 224, 3))
  assert sum(size for size, _ in resnet) == 25_557_032 * 4


def test_the_fitted_constants_are_the_fits_optimum():
  values = calibration.fitted_values()
  best = cv.fitted_error(values)
  for name in calibration.FITTED:
    grid = list(cv.GRIDS[name])
    assert values[name] in grid, f"{name}={values[name]} is not on its grid"
    i = grid.index(values[name])
    for j in (i - 1, i + 1):
      if 0 <= j < len(grid):
        assert cv.fitted_error({**values, name: float(grid[j])}) >= best - 1e-9, name


def test_held_out_rows_within_ten_points_and_their_mean_error():
  """The target on held-out rows (docs/clock.md): at least 85% within 10 points and a mean
  absolute error of at most 5 points."""
  errors = cv.errors()
  held = np.array([not cv.is_fitted(i) for i in range(len(cv.CASES))])
  assert len(cv.CASES) >= 15 and len({case.source for case in cv.CASES}) >= 4
  assert np.mean(np.abs(errors[held]) <= 10) >= 0.85
  assert np.mean(np.abs(errors[held])) <= 5
