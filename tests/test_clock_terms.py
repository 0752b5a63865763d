"""The clock's validated terms against hand-computed timelines, and the validation itself.

Each term (achieved bandwidth, a sharded parameter server, node contention, interference
of overlapped communication, backward-order buckets, default noise) is checked on a tiny
case worked out by hand; then the published-measurement validation (docs/clock.md): its
fitted constants are what the fit gives, and the held-out rows meet the target.
"""

import csv
import dataclasses
import importlib.util
import json
import os
import shutil

import numpy as np
import pytest

from configs import default
from odsgd_jax import cluster
from odsgd_jax.cluster import (Network, Overlap, PipelinedTimeline, SynchronousTimeline,
                               Workers, calibration)
from odsgd_jax.models import gradient_profile
from odsgd_jax.cluster import validation as cv
from tests.helpers import REPO


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


def test_first_looks_are_what_the_clock_predicts_until_a_revision():
  """A case scored under the protocol keeps its first look; while the clock has not been
  revised since, the prediction now must be that first look (its row's 4 decimals):
  a change to the model that moves a scored case without being recorded as a revision
  fails here."""
  scored = [case for case in cv.CASES if case.first_look is not None]
  assert len(scored) >= 15 and len({case.source for case in scored}) >= 3
  assert all(case.batch_name for case in scored)
  for case in scored:
    if case.first_look_revision == cv.REVISION:
      assert cv.predict(case) == pytest.approx(case.first_look, abs=6e-5), case.name


def test_batch_1_first_looks_against_the_target():
  """docs/clock.md's held-out figure for batch 1: its first looks, at least 85% within 10
  points and a mean absolute error of at most 5 points. Later batches are reported as
  measured, a miss included (docs/clock.md), and are not held to it here."""
  errors = np.array([100 * (case.first_look - case.published) for case in cv.CASES
                     if case.batch_name == "1"])
  assert len(errors) == 45
  assert np.mean(np.abs(errors) <= 10) >= 0.85
  assert np.mean(np.abs(errors)) <= 5


def _validate_clock_script():
  spec = importlib.util.spec_from_file_location(
      "validate_clock", os.path.join(REPO, "scripts", "validate_clock.py"))
  script = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(script)
  return script


def test_skill_figures_by_hand():
  """Pearson r, MAE, the count within 10 points and the skill over a constant, on numbers
  worked by hand; the constant fixed before a batch is the median of every earlier case."""
  script = _validate_clock_script()
  predicted, published = np.array([0.9, 0.8, 0.7]), np.array([0.95, 0.75, 0.5])
  got = script.scores(predicted, published)
  assert got["mae"] == pytest.approx((5 + 5 + 20) / 3)
  assert got["within"] == 2
  # r by hand: deviations (0.1, 0, -0.1) and (0.2333, 0.0333, -0.2167)
  dx, dy = np.array([0.1, 0, -0.1]), published - published.mean()
  assert got["r"] == pytest.approx(dx @ dy / np.sqrt((dx @ dx) * (dy @ dy)))
  # the constant 0.8 errs by 15, 5 and 30 points: MAE 50/3, so skill 1 - 10/(50/3) = 0.4
  assert script.skill(predicted, published, 0.8) == pytest.approx(0.4)
  assert script.skill(np.full(3, 0.8), published, 0.8) == pytest.approx(0.0)
  assert np.isnan(script.pearson(np.full(3, 0.8), published))
  before_batch_1 = [case.published for case in cv.CASES if not case.batch_name]
  assert script.prior_median("1") == pytest.approx(np.median(before_batch_1))
  assert script.prior_median("1") == pytest.approx(0.896, abs=5e-4)  # issue 49's figure
  first_of_2 = next(i for i, case in enumerate(cv.CASES) if case.batch_name == "2")
  assert script.prior_median("2") == pytest.approx(
      np.median([case.published for case in cv.CASES[:first_of_2]]))


def test_inferred_inputs_are_named_from_one_list(tmp_path):
  """Every case's inferred inputs are of clock_validation.INFERRED, and a row naming
  another is refused with the column, the value and the allowed names."""
  assert all(set(case.inferred) <= set(cv.INFERRED) for case in cv.CASES)
  assert any(case.inferred for case in cv.CASES)
  with pytest.raises(ValueError, match="inferred='interconnect;guess'.*'guess'.*nodes"):
    cv._inferred("interconnect;guess")


def _case(**changes):
  fields = dict(source="test", where="", model="bert_large", batch=10, images_per_s=100.0,
                gpus=2, per_node=2, intra=(10e9, "line_rate"), library="post_accumulation",
                published=1.0, latency=0.0)
  return cv.Case(**{**fields, **changes})


def test_gradient_accumulation_and_a_half_precision_message_by_hand():
  """Strong scaling with accumulation: 8 micro-batches of 0.1 s on one GPU, 4 on each of
  two, then one all-reduce after the last: BERT-large's 340e6 parameters in half precision
  (0.68e9 bytes) over a 2-GPU ring at 10 GB/s, 2 (N-1)/N S/B = 0.068 s. Per micro-batch
  0.1 s against (0.4 + 0.068) / 4 = 0.117 s: efficiency 0.1 / 0.117."""
  assert cv.message_bytes("bert_large") == pytest.approx(340e6 * 4)
  profile = cv._profile("bert_large")
  assert len(profile) == 24 and profile[0] == pytest.approx((340e6 * 4 / 24, 1 / 24))
  case = _case(accumulation=4, baseline_accumulation=8, baseline_gpus=1, half_message=True)
  assert cv.seconds_per_step(case, 2, cv.IDEAL, accumulation=4) == pytest.approx(0.468)
  assert cv.predict(case, cv.IDEAL) == pytest.approx(0.1 / 0.117)
  full = _case(accumulation=4, baseline_accumulation=8, baseline_gpus=1)
  assert cv.predict(full, cv.IDEAL) == pytest.approx(0.1 / ((0.4 + 0.136) / 4))


def test_leave_one_family_out_by_hand():
  """Families A (a1 fitted at 0.9, a2 not fitted at 0.8), B (b1 at 0.7), C (c1 at 0.6), and a
  'fit' that predicts the mean of its training cases: leaving A out predicts 0.65
  (errors -25 and -15 points), B out 0.75 (+5), C out 0.8 (+20); out of family
  (25 + 15 + 5 + 20) / 4 = 16.25 points."""
  cases = [_case(source=name, published=value, family=name[0].upper())
           for name, value in (("a1", 0.9), ("a2", 0.8), ("b1", 0.7), ("c1", 0.6))]
  folds = cv.cross_validate(
      cases, [True, False, True, True],
      fit_on=lambda training: {"mean": float(np.mean([c.published for c in training]))},
      predict_error=lambda values, case: 100 * (values["mean"] - case.published))
  assert [fold.family for fold in folds] == ["A", "B", "C"]
  assert [fold.values["mean"] for fold in folds] == pytest.approx([0.65, 0.75, 0.8])
  assert list(folds[0].errors.values()) == pytest.approx([-25, -15])
  assert cv.out_of_family_error(folds) == pytest.approx(16.25)


def test_the_stored_folds_are_each_a_fits_optimum_and_reproduce():
  """Each fold of clock_error.json: its constants are on their grids and the best of each
  grid's neighbours on its training rows (the fit's optimum), and its left-out family's
  errors recompute from them."""
  folds = cv.stored_folds()
  fitted = [case for i, case in enumerate(cv.CASES) if cv.is_fitted(i)]
  assert [fold.family for fold in folds] == list(dict.fromkeys(c.family for c in fitted))
  for fold in folds:
    training = [case for case in fitted if case.family != fold.family]
    best = cv.fitted_error(fold.values, training)
    for name in calibration.FITTED:
      grid = list(cv.GRIDS[name])
      i = grid.index(fold.values[name])
      for j in (i - 1, i + 1):
        if 0 <= j < len(grid):
          assert cv.fitted_error({**fold.values, name: float(grid[j])}, training) >= best - 1e-9
    left_out = [case for case in cv.CASES if case.family == fold.family]
    assert [fold.errors[c.name] for c in left_out] == pytest.approx(
        list(cv.errors(fold.values, left_out)), abs=1e-9)
  low, high = cv.constant_ranges(folds)["grpc"]
  assert low <= calibration.TRANSPORTS["grpc"].value <= high


def test_every_presets_links_run_at_its_transports_fitted_shares():
  """A preset's links are its transports' shares as the config reads them, so that the
  robustness check, which changes a share, changes the links the runs were timed on."""
  for name, preset in cluster.PRESETS.items():
    config = default.get_config().cluster
    config.preset = name
    network = cluster.network_from_config(config)
    assert network.efficiency == preset.network.efficiency, name
    assert network.intra_efficiency == preset.network.intra_efficiency, name
    for transport in cluster.transports_of(config):
      slower = cluster.network_from_config(config, {transport: 0.5})
      assert (slower.efficiency, slower.intra_efficiency) != (
          network.efficiency, network.intra_efficiency), (name, transport)


@pytest.fixture(scope="module")
def tcp_ring_run(data_dir, tmp_path_factory):
  """ssgd, 8 workers, 12 ticks of exactly 0.01 s of compute and a ring all-reduce over
  TCP at 1e8 B/s line rate: no noise, interference, contention, overlap or latency, so
  that every tick takes 0.01 + 2 (7/8) S / (1e8 x share) for the model's S bytes."""
  from odsgd_jax import study
  fields = dict(topology="ring", bandwidth=1e8, latency=0.0, transport="tcp", jitter=0.0,
                interference=0.0, node_contention=0.0, overlap="none", step_time=0.01,
                workers_per_node=1)
  spec = study.RunSpec("ssgd", "configs/default.py:ssgd,runlocal", 0, (
      ("data.name", "mnist1d"), ("data.data_dir", data_dir), ("train.num_steps", 12),
      ("train.eval_every", 6), *((f"cluster.{k}", v) for k, v in fields.items())))
  [result] = study.run_study([spec], str(tmp_path_factory.mktemp("tcp_ring")))
  return result


def _replay(result, tcp_share):
  from odsgd_jax import study
  return study.retimed_result(result, {"tcp": tcp_share})


def test_a_finished_run_is_retimed_exactly_and_by_hand(tcp_ring_run):
  from odsgd_jax import study, train
  workdir, summary = tcp_ring_run.workdir, tcp_ring_run.summary
  with open(f"{workdir}/clock.json") as f:
    record = json.load(f)
  assert record["charges"] == [[12, 1, 0.0, 0]]  # every tick an all-reduce of the model
  size = record["inputs"]["model_bytes"]
  assert summary["sim_time_s"] == pytest.approx(12 * (0.01 + 2 * 7 / 8 * size / 1e8), rel=1e-12)
  # the fitted share (tcp 1.0) reproduces the run's clock to the last bit
  assert train.retime(workdir, {})[-1] == summary["sim_time_s"]
  assert train.retime(workdir, {"tcp": calibration.TRANSPORTS["tcp"].value})[-1] == (
      summary["sim_time_s"])
  half = train.retime(workdir, {"tcp": 0.5})
  assert half == pytest.approx([(k + 1) * (0.01 + 2 * 7 / 8 * size / 0.5e8) for k in range(12)],
                               rel=1e-12)
  # the only fitted constant timing the run is tcp's share (its noise, interference and
  # contention are the config's own 0, not the clock's fitted values): the replay keeps them
  assert study.clock_constants(tcp_ring_run) == {"tcp"}
  assert study.retimed_result(tcp_ring_run, {"noise": 0.05}) is tcp_ring_run
  retimed = _replay(tcp_ring_run, 0.5)
  assert retimed.summary["sim_time_s"] == half[-1]
  assert [row["sim_time"] for row in retimed.evaluations] == [half[5], half[11]]
  assert retimed.summary["test_accuracy"] == summary["test_accuracy"]


def test_a_saved_clock_state_keeps_its_record_as_it_was():
  """The checkpoint may serialize the clock's state after later ticks were charged: the
  state is a copy (a shared list once made a resumed run's record one tick longer)."""
  from odsgd_jax.train import SimulatedClock
  timeline = SynchronousTimeline(Workers((1.0, 1.0), 0.01), Network(bandwidth=1e8), 100)
  clock = SimulatedClock(timeline, 0.01, 100, 100)
  for tick in range(3):
    clock.charge(tick, True, None, False)
  state = clock.state_dict()
  clock.charge(3, True, None, False)
  assert state["charges"] == [[3, 1, 0.0, 0]] and clock.charges == [[4, 1, 0.0, 0]]


def test_a_record_of_another_run_length_is_refused(tcp_ring_run, tmp_path):
  import shutil
  from odsgd_jax import train
  workdir = str(tmp_path / "copy")
  shutil.copytree(tcp_ring_run.workdir, workdir)
  with open(f"{workdir}/clock.json") as f:
    record = json.load(f)
  record["charges"] = [[5, 1, 0.0, 0]]
  with open(f"{workdir}/clock.json", "w") as f:
    json.dump(record, f)
  with pytest.raises(ValueError, match="records 5 ticks of a run of 12"):
    train.retime(workdir, {})


def test_clock_variants_are_each_end_then_all_slow_and_all_fast_ends():
  from odsgd_jax import study
  ranges = {"tcp": (0.7, 1.0), "noise": (0.01, 0.03), "interference": (0.2, 0.5)}
  assert study.clock_variants(["tcp", "noise"], ranges) == {
      "noise 0.03": {"noise": 0.03}, "tcp 0.7": {"tcp": 0.7},
      "all slow ends": {"noise": 0.03, "tcp": 0.7}}  # all fast ends: the fitted clock
  assert study.clock_variants(["interference"], ranges) == {
      "interference 0.2": {"interference": 0.2}, "interference 0.5": {"interference": 0.5}}


def test_a_verdict_that_flips_inside_the_range_depends_on_the_clock(tcp_ring_run):
  """A rule that holds while the run ends before `limit`: at tcp 1.0 it does, at 0.5
  (the slow end of a made-up range) the run takes longer and it does not."""
  from odsgd_jax import study
  from odsgd_jax.study import verdicts
  group = study.summarize([tcp_ring_run])[0]
  slow_end = _replay(tcp_ring_run, 0.5).summary["sim_time_s"]

  def decide(limit):
    return lambda studies: [verdicts.Verdict(
        verdicts.HOLDS if studies[0]["ssgd"].sim_time.mean < limit else verdicts.DOES_NOT_HOLD,
        "")]

  ranges = {"tcp": (0.5, 1.0)}
  assert study.robustness([{"ssgd": group}], decide(slow_end - 1e-9), ranges) == [
      "depends on the clock: does not hold with tcp 0.5 (ranges tcp 0.5-1)"]
  assert study.robustness([{"ssgd": group}], decide(slow_end + 1.0), ranges) == ["yes"]


def test_a_new_batch_is_rows_and_its_scoring_fills_only_empty_first_looks(tmp_path,
                                                                         monkeypatch):
  """A case of a batch entered without a first look gets the clock's prediction (4
  places) and the revision, written into its row; the rows already scored stay as they
  were, character for character."""
  script = _validate_clock_script()
  shutil.copytree(cv.MEASUREMENTS, tmp_path / "measurements")
  path = tmp_path / "measurements" / "cases.csv"
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    header, rows = reader.fieldnames, list(reader)
  blank = [i for i, case in enumerate(cv.CASES) if case.first_look is not None][-1]
  rows[blank]["first_look"] = rows[blank]["first_look_revision"] = ""
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
  before = path.read_text().splitlines()
  monkeypatch.setattr(cv, "MEASUREMENTS", str(tmp_path / "measurements"))
  monkeypatch.setattr(cv, "CASES", tuple(
      dataclasses.replace(case, first_look=None, first_look_revision=None) if i == blank
      else case for i, case in enumerate(cv.CASES)))
  filled = script.score_first_looks()
  assert len(filled) == 1 and filled[0].startswith(cv.CASES[blank].name)
  after = path.read_text().splitlines()
  assert [line for i, line in enumerate(after) if i != blank + 1] == [
      line for i, line in enumerate(before) if i != blank + 1]
  with open(path, newline="") as f:
    row = list(csv.DictReader(f))[blank]
  assert float(row["first_look"]) == round(cv.predict(cv.CASES[blank]), 4)
  assert int(row["first_look_revision"]) == cv.REVISION
  monkeypatch.setattr(cv, "CASES", tuple(  # as cases.csv now reads
      dataclasses.replace(case, first_look=float(row["first_look"])) if i == blank else case
      for i, case in enumerate(cv.CASES)))
  assert script.score_first_looks() == []  # never twice
