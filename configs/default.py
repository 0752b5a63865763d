"""Default experiment: MNIST-1D (held-out splits), CNN1D, 8 workers, OD-SGD.

Builds its data offline and runs in about a minute on a 2-core CPU:

  python -m experiments.train --config configs/default.py --workdir runs/default

Any field can be overridden, e.g. --config.optimizer.learning_rate=0.05, and
another strategy chosen after a colon: --config configs/default.py:ssgd.
"""

import ml_collections
from ml_collections import config_dict

from configs import _strategies
from odsgd_jax.cluster import calibration


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()

  config.data = ml_collections.ConfigDict()
  # mnist1d_heldout: the standard 4000 training signals, 2,000 validation and 10,000 test
  # (docs/data.md); mnist1d is the standard 4000/1000 split. Others: digits | mnist |
  # cifar10 | imagenet2012.
  config.data.name = "mnist1d_heldout"
  # None: $TFDS_DATA_DIR or ~/tensorflow_datasets
  config.data.data_dir = config_dict.placeholder(str)
  config.data.batch_size = 128  # global: split evenly over the workers
  config.data.eval_batch_size = 1000
  config.data.num_threads = 2  # host threads preparing batches ahead of the step
  config.data.prefetch = 8  # batches prepared ahead

  config.model = ml_collections.ConfigDict()
  config.model.name = "cnn1d"  # mlp | cnn1d | lenet5 | resnet20 | resnet50; other fields go to it

  config.strategy = ml_collections.ConfigDict()
  config.strategy.name = "odsgd"  # other fields are the strategy factory's keyword options
  config.strategy.local_lr = 0.1  # local compensation step (authors' 0.5 / N = 0.0625)
  config.strategy.local_optimizer = "sgd"  # sgd | momentum | dcasgd
  config.strategy.warmup_steps = 200  # synchronous steps first (authors: 200)
  config.strategy.dc_lambda = 2.0  # only for local_optimizer="dcasgd"

  # The inner optimizer: what each strategy applies to the gradient it chooses.
  config.optimizer = ml_collections.ConfigDict()
  config.optimizer.name = "sgd"  # sgd | adam
  config.optimizer.learning_rate = 0.1  # peak rate
  config.optimizer.momentum = 0.9  # sgd only; 0 for plain SGD
  config.optimizer.nesterov = False
  config.optimizer.weight_decay = 0.0  # coupled L2, added to the gradient
  config.optimizer.schedule = "cosine"  # constant | cosine | step
  config.optimizer.warmup_steps = 0  # linear warm-up from 0
  config.optimizer.decay_epochs = ()  # step schedule: multiply by decay_factor at these epochs
  config.optimizer.decay_factor = 0.1

  # The simulated cluster: its clock (sim_time) and, for asgd/ssp/oscars, the schedule.
  config.cluster = ml_collections.ConfigDict()
  config.cluster.num_workers = 8  # logical workers N; a multiple of the device groups
  config.cluster.speeds = ()  # speed factor per worker; () = all 1.0
  config.cluster.step_time = 0.01  # seconds of one step at speed 1; 0: measure this host's
  config.cluster.compute_scale = 1.0  # multiplies a measured step time
  # The clock's terms validated against published scaling measurements (docs/clock.md);
  # jitter=0, interference=0, node_contention=0, transport=line_rate: the clock before.
  config.cluster.jitter = calibration.NOISE.value  # sigma of lognormal noise on each step
  config.cluster.interference = calibration.INTERFERENCE.value  # compute lost per second of
  # communication beside it
  config.cluster.node_contention = calibration.NODE_CONTENTION.value  # s per sample of a
  # further worker on the node (workers_per_node) lost to the shared host
  config.cluster.transport = ""  # achieved share of line rate: "" = a preset's own (the
  # fields' bandwidth: as given), or one of docs/clock.md's transports
  config.cluster.workload = ""  # a reference workload (docs/cluster.md): its step time,
  # batch and message win over step_time and message_bytes
  config.cluster.straggler_prob = 0.0  # probability a step straggles ...
  config.cluster.straggler_slowdown = 1.0  # ... and by how much
  config.cluster.preset = ""  # a named network (docs/cluster.md): its numbers win over the 6 below
  config.cluster.topology = "ring"  # ring | tree | torus | ps | hierarchical
  config.cluster.bandwidth = 1e7  # bytes/s: CNN1D's all-reduce is ~37% of an ssgd tick
  config.cluster.latency = 5e-5  # seconds per message
  config.cluster.intra_bandwidth = 1e9  # bytes/s inside a node (hierarchical)
  config.cluster.workers_per_node = 4  # workers sharing a node (hierarchical)
  config.cluster.inter_topology = "ring"  # ring | tree: across nodes (hierarchical)
  config.cluster.message_bytes = 0  # bytes a worker sends per sync; 0: the model's own
  # How ssgd's all-reduce overlaps its backward pass (and odsgd's synchronous warm-up):
  # "buckets" as PyTorch DDP (25 MiB buckets, backward 2/3 of a step), or "none".
  config.cluster.overlap = "buckets"
  config.cluster.backward_share = 2 / 3  # of a step's compute (forward:backward = 1:2)
  config.cluster.bucket_bytes = 25 * 2**20  # DDP's bucket_cap_mb=25
  config.cluster.seed = 0  # jitter and stragglers

  config.parallel = ml_collections.ConfigDict()
  config.parallel.num_devices = 0  # 0: all visible devices, or as many as the workers fill evenly
  config.parallel.devices_per_worker = 1  # >1: a worker spans several devices

  config.train = ml_collections.ConfigDict()
  config.train.num_steps = 3000
  config.train.eval_every = 500  # also at the end
  config.train.checkpoint_every = 1000  # also at the end
  config.train.log_every = 1  # every step: cheap at this size
  config.train.norms_every = 10  # gradient, update, parameter norms: 3 passes over the model
  config.train.seed = 0  # initial parameters, data order, augmentation
  config.train.max_checkpoints = 2
  config.train.progress_bar = True
  # XLA's GPU ops deterministic (set by `python -m experiments.train` before JAX starts), so
  # that a resumed run is bit-identical to an uninterrupted one on a GPU too; False: faster
  # GPU steps, resume equal up to float rounding. CPU runs are deterministic either way.
  config.train.deterministic = True
  config.train.target_accuracy = 0.9  # summary.json: simulated time to reach it (0: skip)
  return _strategies.with_arg(config, arg)
