"""The cluster simulator against hand-computed timelines (3 workers)."""

import numpy as np
import optax
import pytest

from odsgd_jax import cluster
from odsgd_jax.cluster import Network, Overlap, Workers
from odsgd_jax.strategies import get_strategy
from configs import _strategies
from odsgd_jax.train import train_and_evaluate
from tests.helpers import saved_state
from tests.least_squares import run_jax

def make_timeline(name, options, workers, network, message_bytes, overlap=None):
  """Strategy `name`'s timeline rule, as the simulated clock builds it."""
  return get_strategy(name).make_timeline(workers, network, message_bytes, overlap, **options)


SPEEDS = (1.0, 0.5, 0.25)  # compute times 1, 2 and 4 seconds
WORKERS = Workers(speeds=SPEEDS, step_time=1.0)
NETWORK = Network(bandwidth=100.0)  # bytes/s, no latency
BYTES = 100.0  # one message: 1 s on a link
RING_3 = 2 * 2 / 3 * 1.0  # 2(N-1)/N * S/B


def test_ring_ps_and_hierarchical_formulas():
  ring = Network(bandwidth=1e6, latency=1e-3)
  assert ring.allreduce_time(8, 4e6) == pytest.approx(2 * 7 / 8 * 4.0 + 2 * 7 * 1e-3)
  assert ring.allreduce_time(1, 4e6) == 0.0
  ps = Network(bandwidth=1e6, latency=1e-3, topology="ps")
  assert ps.allreduce_time(8, 4e6) == pytest.approx(8 * 4.0 + 1e-3)
  hierarchical = Network(bandwidth=1e6, latency=0.0, topology="hierarchical",
                         intra_bandwidth=1e8, workers_per_node=4)
  inside, across = 2 * 3 / 4 * 4e6 / 1e8, 2 * 1 / 2 * 4.0  # 4 per node, 2 nodes
  assert hierarchical.allreduce_time(8, 4e6) == pytest.approx(inside + across)
  assert ring.message_time(2e6) == pytest.approx(2.0 + 1e-3)


def test_compute_times_are_deterministic_under_a_seed():
  noisy = Workers(speeds=SPEEDS, step_time=1.0, jitter=0.3, straggler_prob=0.2,
                  straggler_slowdown=5.0, seed=3)
  again = Workers(speeds=SPEEDS, step_time=1.0, jitter=0.3, straggler_prob=0.2,
                  straggler_slowdown=5.0, seed=3)
  other = Workers(speeds=SPEEDS, step_time=1.0, jitter=0.3, straggler_prob=0.2,
                  straggler_slowdown=5.0, seed=4)
  for tick in range(5):
    np.testing.assert_array_equal(noisy.compute_times(tick), again.compute_times(tick))
  assert not np.array_equal(noisy.compute_times(0), other.compute_times(0))
  np.testing.assert_allclose(WORKERS.compute_times(7), [1.0, 2.0, 4.0])
  slow = np.mean([noisy.compute_times(t)[0] for t in range(2000)])
  assert 1.4 < slow < 2.2  # lognormal mean e^(0.045) with 20% of steps 5x slower: ~1.87


def test_ssgd_waits_for_the_slowest_then_all_reduces():
  cost = make_timeline("ssgd", {}, WORKERS, NETWORK, BYTES).cost(0)
  assert cost.duration == pytest.approx(4 + RING_3)
  np.testing.assert_allclose(cost.idle, [3, 2, 0])
  np.testing.assert_allclose(cost.communication, RING_3)


def test_gossip_sends_a_message_to_each_peer_beside_or_after_the_compute():
  # 3 workers: a ring's peers are both others (offsets 1, 2); 8: two on a ring, three
  # (1, 2, 4 ahead) on the exponential graph
  assert [len(cluster.gossip_offsets(g, n)) for g, n in
          [("ring", 3), ("ring", 8), ("exponential", 8), ("complete", 8), ("ring", 1)]] == [
              2, 2, 3, 7, 0]
  mixed_first = make_timeline("gossip", {}, WORKERS, NETWORK, BYTES).cost(0)
  assert mixed_first.duration == pytest.approx(4.0)  # max(4, 2 messages of 1 s)
  np.testing.assert_allclose(mixed_first.idle, [3, 2, 0])
  stepped_first = make_timeline("gossip", {"order": "step_first"}, WORKERS, NETWORK, BYTES)
  assert stepped_first.cost(0).duration == pytest.approx(4 + 2.0)
  slow = make_timeline("gossip", {}, WORKERS, Network(bandwidth=10.0), BYTES).cost(0)
  assert slow.duration == pytest.approx(2 * 10.0)  # the exchange outlasts the compute
  complete = make_timeline("gossip", {"graph": "complete", "order": "step_first"}, WORKERS,
                           NETWORK, BYTES)
  assert complete.cost(0).duration == pytest.approx(4 + RING_3)  # the mean is an all-reduce


def test_pipelined_strategies_hide_the_all_reduce_after_warmup():
  timeline = make_timeline("odsgd", {"warmup_steps": 1}, WORKERS, NETWORK, BYTES)
  assert timeline.cost(0).duration == pytest.approx(4 + RING_3)  # warm-up: synchronous
  assert timeline.cost(1).duration == pytest.approx(4.0)  # max(4, 1.33)
  slow_network = Network(bandwidth=10.0)  # all-reduce 13.33 s: longer than compute
  cost = make_timeline("pseudo_sync", {}, WORKERS, slow_network, BYTES).cost(5)
  assert cost.duration == pytest.approx(10 * RING_3)
  np.testing.assert_allclose(cost.communication, 10 * RING_3 - 4)


def test_local_sgd_round_is_the_slowest_total_plus_one_all_reduce():
  timeline = make_timeline("local_sgd", {}, WORKERS, NETWORK, BYTES)
  first, second = timeline.cost(0), timeline.cost(1, round_end=True)
  assert first.duration == pytest.approx(4.0)
  assert first.duration + second.duration == pytest.approx(8 + RING_3)  # max_i sum c_i + comm
  np.testing.assert_allclose(second.idle, [6, 4, 0])
  assert timeline.cost(2).duration == pytest.approx(4.0)  # a new round starts from zero


def test_oscars_ticks_let_slow_workers_step_less_and_nobody_wait():
  timeline = make_timeline("oscars", {}, WORKERS, NETWORK, BYTES)
  active = [timeline.schedule(t).active.astype(int).tolist() for t in range(8)]
  assert active == [[1, 0, 0], [1, 1, 0], [1, 0, 0], [1, 1, 1]] * 2
  assert timeline.cost(0).duration == pytest.approx(1.0)
  end = timeline.cost(3, round_end=True)
  assert end.duration == pytest.approx(1 + RING_3)
  np.testing.assert_allclose(end.idle, 0)


def test_asynchronous_arrivals_follow_the_speeds():
  """Cycle = compute + push + pull (1 s each way); ticks are the fastest cycle, 3 s.
  Pushes land at 2 s (w0), 3 s (w1), 5 s (w2); w0 lands again at 5 s: a tie, rotated."""
  for name in ("asgd", "ssp"):
    timeline = make_timeline(name, {}, WORKERS, NETWORK, BYTES)
    first, second = timeline.schedule(0), timeline.schedule(1)
    assert first.active.tolist() == [True, True, False]
    assert first.arrival_order.tolist()[:2] == [0, 1]
    assert second.active.tolist() == [True, False, True]
    assert second.arrival_order.tolist()[:2] == [2, 0]  # tie at 5 s: rotation of tick 1
    assert timeline.cost(0).duration == pytest.approx(3.0)


def test_homogeneous_asynchronous_cluster_is_the_rotating_default():
  timeline = make_timeline("asgd", {}, Workers(speeds=(1.0,) * 3, step_time=1.0), NETWORK,
                           BYTES)
  for tick in range(6):
    schedule = timeline.schedule(tick)
    assert schedule.active.all()
    assert schedule.arrival_order.tolist() == np.roll(np.arange(3), -(tick % 3)).tolist()


def _expected_staleness(schedules, num_workers):
  """Server updates between a worker's pull and its push, from the arrivals alone."""
  version, pulled, per_tick = 0, [0] * num_workers, []
  for active, order in schedules:
    stale = []
    for worker in order:
      if active[worker]:
        stale.append(version - pulled[worker])
        version += 1
        pulled[worker] = version
    per_tick.append((np.mean(stale) if stale else 0.0, max(stale, default=0)))
  return per_tick


@pytest.mark.parametrize("speeds", [(1.0, 1.0, 1.0), (1.0, 1.0, 0.25)])
def test_asgd_staleness_in_the_run_follows_from_the_speeds(speeds):
  timeline = make_timeline("asgd", {}, Workers(speeds=speeds, step_time=1.0), NETWORK, BYTES)
  schedules = [(s.active, s.arrival_order) for s in (timeline.schedule(t) for t in range(12))]
  _, _, logs = run_jax("asgd", optax.sgd(0.1), schedules, num_workers=3, with_logs=True)
  expected = _expected_staleness(schedules, 3)
  assert [log["staleness_max"] for log in logs] == [m for _, m in expected]
  np.testing.assert_allclose([log["staleness_mean"] for log in logs], [m for m, _ in expected],
                             rtol=1e-6)
  if speeds[-1] < 1:
    assert max(m for _, m in expected) > 2  # the slow worker falls further behind
  else:  # rotating order: mean staleness N - 1 (the first of one tick is last of the next)
    np.testing.assert_allclose([log["staleness_mean"] for log in logs][1:], 2.0)


def test_oscars_workers_do_4_2_and_1_local_steps_per_round_in_a_run(small_config, tmp_path):
  config = _strategies.use_strategy(small_config, "oscars")
  config.strategy.period = 4
  config.cluster.num_workers = 3
  config.cluster.speeds = SPEEDS
  config.cluster.jitter = config.cluster.node_contention = 0.0  # the hand-computed clock
  config.parallel.num_devices = 1
  config.data.batch_size = 48
  config.train.num_steps = 8
  config.train.checkpoint_every = 4
  workdir = str(tmp_path / "oscars")
  summary = train_and_evaluate(config, workdir)
  for step in (4, 8):
    assert saved_state(workdir, step)["opt_state"]["last_round_steps"].tolist() == [4, 2, 1]
  # nobody waits on oscars' clock: 8 ticks of one step time plus 2 round-end all-reduces
  round_trip = Network(bandwidth=config.cluster.bandwidth, latency=config.cluster.latency
                       ).allreduce_time(3, summary["sim_message_bytes"])
  assert summary["sim_time_s"] == pytest.approx(8 * config.cluster.step_time + 2 * round_trip)
  assert max(summary["sim_time_fractions"]["idle"]) == 0.0


def test_tree_torus_and_hierarchical_formulas():
  """Bandwidth term 2(N-1)/N S/B for all; latency 2 ceil(log2 N), 2 sum(n_d - 1), and
  the hierarchical stages added up."""
  tree = Network(bandwidth=1e6, latency=1e-3, topology="tree")
  assert tree.allreduce_time(8, 4e6) == pytest.approx(2 * 7 / 8 * 4.0 + 2 * 3 * 1e-3)
  assert tree.allreduce_time(5, 4e6) == pytest.approx(2 * 4 / 5 * 4.0 + 2 * 3 * 1e-3)
  assert tree.allgather_time(8, 1e6) == pytest.approx(7 * 1.0 + 3 * 1e-3)
  torus = Network(bandwidth=1e6, latency=1e-3, topology="torus")  # 64 = 4 x 4 x 4
  assert torus.allreduce_time(64, 4e6) == pytest.approx(2 * 63 / 64 * 4.0 + 2 * 9 * 1e-3)
  hierarchical = Network(bandwidth=1e6, latency=1e-3, topology="hierarchical",
                         intra_bandwidth=1e8, workers_per_node=4, inter_topology="tree")
  inside = 2 * 3 / 4 * 4e6 / 1e8 + 2 * 3 * 1e-3  # a ring of 4 in the node
  across = 2 * 7 / 8 * 4.0 + 2 * 3 * 1e-3  # a tree of 8 nodes
  assert hierarchical.allreduce_time(32, 4e6) == pytest.approx(inside + across)
  # at large N a tree's latency grows like log N, a ring's like N
  ring = Network(bandwidth=1e12, latency=1e-5)
  tree = Network(bandwidth=1e12, latency=1e-5, topology="tree")
  assert ring.allreduce_time(4096, 1.0) / tree.allreduce_time(4096, 1.0) > 300


def test_a_preset_against_hand_computed_values():
  """10 GbE: 1.25e9 B/s at TCP's fitted share (1.0), 20 us, tree. ResNet-50's 102,228,128
  bytes over 8 workers; a step of batch 112 at 367 images/s."""
  from odsgd_jax.cluster import PRESETS, WORKLOADS
  network, load = PRESETS["10gbe"].network, WORKLOADS["resnet50_v100"]
  assert load.message_bytes == 102_228_128 and load.step_time == pytest.approx(0.3052, abs=1e-4)
  assert network.efficiency == cluster.TRANSPORTS["tcp"].value == 1.0
  # a tree over 8: 2 * 7/8 * 102,228,128 B / 1.25e9 B/s + 2 * ceil(log2 8) * 20 us
  #               = 0.14311938 s + 0.00012 s
  assert network.allreduce_time(8, load.message_bytes) == pytest.approx(0.14323938, rel=1e-7)


def test_workloads_carry_the_real_model_sizes():
  import jax
  import jax.numpy as jnp
  from odsgd_jax.cluster import WORKLOADS
  from odsgd_jax.models import make_model
  model = make_model("resnet50", 1000)
  variables = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 224, 224, 3)),
                                                train=False))
  num_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(variables["params"]))
  assert WORKLOADS["resnet50_v100"].message_bytes == num_bytes


def test_the_gpt2_workload_is_derived_from_its_config():
  """GPT-2 small's message is the parameters of this project's transformer at its config
  (124,439,808, GPT-2's published count), its FLOPs put the cited step time at a model-FLOP
  utilization near the ~60% llm.c reports on the A100, and its backward order puts the
  tied embedding's gradient last."""
  import jax
  import jax.numpy as jnp
  from odsgd_jax.cluster import WORKLOADS
  from odsgd_jax.models import gradient_profile, make_model
  load = WORKLOADS["gpt2_124m_a100"]
  options = dict(load.model_options)
  model = make_model("transformer", load.num_classes, **options)
  variables = jax.eval_shape(lambda: model.init(
      jax.random.key(0), jnp.zeros((1, *load.model[1]), jnp.int32), train=False))
  count = sum(x.size for x in jax.tree.leaves(variables["params"]))
  assert count == 124_439_808 and load.message_bytes == 4 * count
  # 6 x (12 x 12 x 768^2 + 50,257 x 768) + 12 x 12 x 1,024 x 768 per token, 65,536 tokens
  assert load.flops_per_step == pytest.approx(65_536 * (6 * (12 * 12 * 768**2 + 50_257 * 768)
                                                        + 12 * 12 * 1_024 * 768))
  assert load.step_time == pytest.approx(5400 / 19_073)
  assert 0.55 < load.flops_per_step / load.step_time / 312e12 < 0.7  # A100 bf16 peak
  profile = gradient_profile("transformer", load.model[1], load.num_classes, **options)
  # every parameter but the learned positions (a bare parameter, no layer), last first
  assert sum(size for size, _ in profile) == 4 * (count - 1_024 * 768)
  assert profile[0] == (0.0, pytest.approx(profile[0][1]))  # the tied output: FLOPs only
  assert profile[-1] == (4 * 50_257 * 768, 1.0)  # the embedding, complete at the end
  assert all(a[1] <= b[1] for a, b in zip(profile, profile[1:], strict=False))


def test_overlapped_ssgd_starts_each_bucket_as_the_backward_pass_produces_it():
  """3 workers, compute 1, 2, 4 s (the slowest: 4/3 s forward, 8/3 s backward); 250
  bytes in buckets of 100: 100, 100, 50, each all-reduced in 2(N-1)/N S/B = 4/3 S/100 s.
  Ready at 4 (1/3 + 2/3 q) = 2.4, 3.467, 4.0 (q = 0.4, 0.8, 1); all-reduces of 1.333,
  1.333, 0.667 s: 2.4 -> 3.733, then 3.733 -> 5.067, then 5.067 -> 5.733."""
  overlap = Overlap(backward_share=2 / 3, bucket_bytes=100)
  timeline = make_timeline("ssgd", {}, WORKERS, NETWORK, 250.0, overlap)
  cost = timeline.cost(0)
  assert cost.duration == pytest.approx(4 + 1.7333333, abs=1e-6)
  np.testing.assert_allclose(cost.communication, 1.7333333, atol=1e-6)
  np.testing.assert_allclose(cost.idle, [3, 2, 0])
  no_overlap = make_timeline("ssgd", {}, WORKERS, NETWORK, 250.0, None).cost(0)
  assert no_overlap.duration == pytest.approx(4 + 2 * 2 / 3 * 2.5)
  # one bucket (DDP's 25 MiB against a small model): nothing overlaps
  small = make_timeline("ssgd", {}, WORKERS, NETWORK, BYTES, Overlap()).cost(0)
  assert small.duration == pytest.approx(4 + RING_3)
  # a slow network: the buckets queue, and the tick is the all-reduce's own length
  slow = make_timeline("ssgd", {}, WORKERS, Network(bandwidth=1.0), 250.0, overlap).cost(0)
  assert slow.duration == pytest.approx(2.4 + 4 / 3 * 250)


def test_odsgd_warmup_ticks_use_the_overlapped_synchronous_clock():
  overlap = Overlap(backward_share=2 / 3, bucket_bytes=100)
  timeline = make_timeline("odsgd", {"warmup_steps": 1}, WORKERS, NETWORK, 250.0, overlap)
  assert timeline.cost(0).duration == pytest.approx(4 + 1.7333333, abs=1e-6)
  assert timeline.cost(1).duration == pytest.approx(4.0)  # max(4, 3.33)


def test_every_rule_is_exported_by_the_cluster_package():
  from odsgd_jax.cluster import _timelines
  rules = {name for name, value in vars(_timelines).items()
           if isinstance(value, type) and issubclass(value, cluster.Timeline)}
  assert rules <= set(_timelines.__all__)
  assert all(getattr(cluster, name) is getattr(_timelines, name) for name in _timelines.__all__)
