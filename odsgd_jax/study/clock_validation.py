"""The simulated clock against published scaling measurements of data-parallel training.

Each case is a measurement as published (its source, table or figure, and setup); the
clock is configured from the setup's own numbers only: gradient bytes and their
backward order from the model (`odsgd_jax.models.gradient_profile`), per-step compute
from the one-GPU throughput at the stated batch, links at line rate with their
transport's achieved fraction, the library's topology and bucket size. It predicts the
weak-scaling efficiency T(base) / T(N) of synchronous SGD (the ssgd timeline, averaged
over ticks with noisy workers) and is compared with the published figure.

The 31 cases before the protocol of docs/clock.md were all seen while the model was built;
of them the 1st, 3rd, 5th, ... are fitted (the constants in
odsgd_jax/cluster/_calibration.py marked fitted were chosen on them). Later cases come in
batches, each scored once with the clock as it stood (its `first_look`, kept as a literal
beside the case); their first-look error is the held-out error (docs/clock.md, "The
protocol").
"""

import dataclasses
import functools
import json
import math
import os
from typing import Sequence

import numpy as np

from odsgd_jax.cluster import Network, Overlap, SynchronousTimeline, Workers
from odsgd_jax.cluster._calibration import (FITTED, INTERFERENCE, NODE_CONTENTION, NOISE,
                                            TRANSPORTS, fitted_values)

SOURCES = {
    "tf": "TensorFlow performance benchmarks (tensorflow.org, r1 guide 'Benchmarks', "
          "test date May 2017; tensorflow/docs site/en/r1/guide/performance/benchmarks.md)",
    "horovod": "Horovod README (Sergeev & Del Balso, arXiv 1802.05799): '90% scaling "
               "efficiency for both Inception V3 and ResNet-101, and 79% for VGG-16' on 32 "
               "servers of 4 Pascal GPUs with 25 Gb/s RoCE (2018 versions), '... 68% for "
               "VGG-16' on 128 such servers (later versions and docs/benchmarks); the text's "
               "figures, not read off the chart",
    "dle": "NVIDIA DeepLearningExamples, ResNet50 v1.5 for PyTorch, README 'Training "
           "performance results' (pytorch-21.03 NGC container); batch sizes from its configs.yml",
    "goyal": "Goyal et al. 2017, Accurate, Large Minibatch SGD (arXiv 1706.02677), section "
             "5.4 / Figure 7: ~90% scaling efficiency from 8 to 256 P100 GPUs",
    "ebug": "the report of e-bug/distributed-tensorflow-benchmarks (ETH Zurich and CSCS, test "
            "date August 2017), report/source/benchmarks.tex at 097e9d7, table 'Parameters "
            "achieving peak performance on p2.8xlarge systems' (synthetic data)",
    "dle_txl": "NVIDIA DeepLearningExamples, Transformer-XL for PyTorch, README at 729963d, "
               "'Training performance: 8x NVIDIA DGX-2H (16x V100 32GB)' (large model, "
               "LOCAL_BATCH_SIZE=4); one GPU's rate: 'Training performance: NVIDIA DGX-2H', "
               "large model, 1 GPU at batch 8",
    "dle_bert": "NVIDIA DeepLearningExamples, BERT for PyTorch, README at 729963d, 'Pre-training "
                "NVIDIA DGX A100 (8x A100 80GB) Multi-node Scaling' (strong scaling with "
                "gradient accumulation); one GPU's rate: 'Pre-training NVIDIA DGX A100 (8x "
                "A100 80GB)', 1 GPU; the all-reduce after accumulation, in half precision "
                "with mixed precision (scripts/run_pretraining.sh's defaults)",
    "dle_efficientnet": "NVIDIA DeepLearningExamples, EfficientNet v1 for TensorFlow2, README "
                        "at 729963d, 'Training performance results for EfficientNet v1-B0 / "
                        "v1-B4' (DGX A100 80GB, DGX-1 V100 32GB; Horovod); batches per GPU from "
                        "its train_benchmark_8x*.sh scripts",
}

# The clock's revisions so far (docs/clock.md). A case's first look was computed at a
# revision; while none has been made since, its prediction is its first look
# (tests/test_clock_terms.py).
REVISION = 3

# The first looks of the protocol's batches: {case name: (predicted efficiency, REVISION
# then)}, written once by the commit that scores a batch (`python scripts/validate_clock.py
# --first-look` prints them) and never changed.
FIRST_LOOKS: dict[str, tuple[float, int]] = {
    'ebug: inception_v3, 2 GPUs (EC2 p2.8xlarge x 1 (1 PS), batch 64)': (0.9918, 3),
    'ebug: inception_v3, 4 GPUs (EC2 p2.8xlarge x 1 (1 PS), batch 64)': (0.9852, 3),
    'ebug: inception_v3, 8 GPUs (EC2 p2.8xlarge x 1 (1 PS), batch 64)': (0.9785, 3),
    'ebug: inception_v3, 16 GPUs (EC2 p2.8xlarge x 2 (1 PS), batch 64)': (0.9451, 3),
    'ebug: inception_v3, 32 GPUs (EC2 p2.8xlarge x 4 (3 PS), batch 64)': (0.9226, 3),
    'ebug: inception_v3, 64 GPUs (EC2 p2.8xlarge x 8 (8 PS), batch 64)': (0.8978, 3),
    'ebug: inception_v3, 128 GPUs (EC2 p2.8xlarge x 16 (16 PS), batch 64)': (0.8894, 3),
    'dle_txl: transformer_xl_large, 32 GPUs (2 DGX-2H, FP32, batch 4)': (0.9821, 3),
    'dle_txl: transformer_xl_large, 64 GPUs (4 DGX-2H, FP32, batch 4)': (0.9724, 3),
    'dle_txl: transformer_xl_large, 128 GPUs (8 DGX-2H, FP32, batch 4)': (0.9669, 3),
    'dle_txl: transformer_xl_large, 32 GPUs (2 DGX-2H, mixed, batch 4)': (0.9592, 3),
    'dle_txl: transformer_xl_large, 64 GPUs (4 DGX-2H, mixed, batch 4)': (0.9391, 3),
    'dle_txl: transformer_xl_large, 128 GPUs (8 DGX-2H, mixed, batch 4)': (0.9286, 3),
    'dle_bert: bert_large, 16 GPUs (2 DGX A100, mixed, seq 128, batch 256)': (0.9951, 3),
    'dle_bert: bert_large, 32 GPUs (4 DGX A100, mixed, seq 128, batch 256)': (0.989, 3),
    'dle_bert: bert_large, 64 GPUs (8 DGX A100, mixed, seq 128, batch 256)': (0.9823, 3),
    'dle_bert: bert_large, 128 GPUs (16 DGX A100, mixed, seq 128, batch 256)': (0.973, 3),
    'dle_bert: bert_large, 256 GPUs (32 DGX A100, mixed, seq 128, batch 256)': (0.9576, 3),
    'dle_bert: bert_large, 16 GPUs (2 DGX A100, TF32, seq 128, batch 128)': (0.995, 3),
    'dle_bert: bert_large, 32 GPUs (4 DGX A100, TF32, seq 128, batch 128)': (0.9887, 3),
    'dle_bert: bert_large, 64 GPUs (8 DGX A100, TF32, seq 128, batch 128)': (0.9816, 3),
    'dle_bert: bert_large, 128 GPUs (16 DGX A100, TF32, seq 128, batch 128)': (0.9715, 3),
    'dle_bert: bert_large, 256 GPUs (32 DGX A100, TF32, seq 128, batch 128)': (0.9549, 3),
    'dle_bert: bert_large, 16 GPUs (2 DGX A100, mixed, seq 512, batch 32)': (0.9953, 3),
    'dle_bert: bert_large, 32 GPUs (4 DGX A100, mixed, seq 512, batch 32)': (0.9896, 3),
    'dle_bert: bert_large, 64 GPUs (8 DGX A100, mixed, seq 512, batch 32)': (0.9838, 3),
    'dle_bert: bert_large, 128 GPUs (16 DGX A100, mixed, seq 512, batch 32)': (0.9763, 3),
    'dle_bert: bert_large, 256 GPUs (32 DGX A100, mixed, seq 512, batch 32)': (0.9645, 3),
    'dle_bert: bert_large, 16 GPUs (2 DGX A100, TF32, seq 512, batch 16)': (0.9953, 3),
    'dle_bert: bert_large, 32 GPUs (4 DGX A100, TF32, seq 512, batch 16)': (0.9895, 3),
    'dle_bert: bert_large, 64 GPUs (8 DGX A100, TF32, seq 512, batch 16)': (0.9836, 3),
    'dle_bert: bert_large, 128 GPUs (16 DGX A100, TF32, seq 512, batch 16)': (0.9758, 3),
    'dle_bert: bert_large, 256 GPUs (32 DGX A100, TF32, seq 512, batch 16)': (0.9635, 3),
    'dle_efficientnet: efficientnet_b0, 16 GPUs (2 DGX A100, TF32, batch 512)': (0.9958, 3),
    'dle_efficientnet: efficientnet_b0, 16 GPUs (2 DGX A100, mixed, batch 1024)': (0.996, 3),
    'dle_efficientnet: efficientnet_b0, 32 GPUs (4 DGX-1 V100, FP32, batch 256)': (0.9895, 3),
    'dle_efficientnet: efficientnet_b0, 32 GPUs (4 DGX-1 V100, mixed, batch 512)': (0.9905, 3),
    'dle_efficientnet: efficientnet_b4, 32 GPUs (4 DGX A100, TF32, batch 80)': (0.9912, 3),
    'dle_efficientnet: efficientnet_b4, 64 GPUs (8 DGX A100, TF32, batch 80)': (0.9879, 3),
    'dle_efficientnet: efficientnet_b4, 32 GPUs (4 DGX A100, mixed, batch 160)': (0.9911, 3),
    'dle_efficientnet: efficientnet_b4, 64 GPUs (8 DGX A100, mixed, batch 160)': (0.9878, 3),
    'dle_efficientnet: efficientnet_b4, 32 GPUs (4 DGX-1 V100, FP32, batch 32)': (0.9895, 3),
    'dle_efficientnet: efficientnet_b4, 64 GPUs (8 DGX-1 V100, FP32, batch 32)': (0.9859, 3),
    'dle_efficientnet: efficientnet_b4, 32 GPUs (4 DGX-1 V100, mixed, batch 64)': (0.9888, 3),
    'dle_efficientnet: efficientnet_b4, 64 GPUs (8 DGX-1 V100, mixed, batch 64)': (0.9852, 3),
}

GB = 1e9
NVLINK_P100 = 80 * GB  # 4 NVLink 1.0 links x 20 GB/s per direction (DGX-1 P100)
NVLINK_V100 = 150 * GB  # 6 NVLink 2.0 links x 25 GB/s (DGX-1 V100 white paper; DGX-2's
# NVSwitch gives each V100 the same six links)
NVLINK_A100 = 300 * GB  # 12 NVLink 3.0 links x 25 GB/s (DGX A100)
PCIE3 = 15.75 * GB  # PCIe 3.0 x16, one direction
# Between DGX nodes, every adapter of the node together (NCCL uses them all):
DGX1_IB = 4 * 12.5 * GB  # DGX-1 V100: 4 x 100 Gb/s EDR (DGX-1 V100 white paper)
DGX2_IB = 8 * 12.5 * GB  # DGX-2(H): 8 x 100 Gb/s EDR InfiniBand (DGX-2 data sheet)
DGXA100_IB = 8 * 25 * GB  # DGX A100: 8 x 200 Gb/s HDR InfiniBand (DGX A100 data sheet)

# Bytes of a gradient message: a float32 copy of the parameters.
_PROFILES = {  # name: (flax model, options) for odsgd_jax.models.gradient_profile
    "resnet50": ("resnet50", ()),
    "resnet101": ("resnet50", (("stage_sizes", (3, 4, 23, 3)),)),
    "resnet152": ("resnet50", (("stage_sizes", (3, 8, 36, 3)),)),
    "vgg16": ("vgg16", ()),
}
# Models with no flax model here: (parameters, layers), their layers taken as equal in size
# and in backward work.
_EQUAL_LAYERS = {
    "inception_v3": (23_851_784, 95),  # Keras InceptionV3 with its 1000-class top: 94
    # convolutions and the classifier
    "transformer_xl_large": (257_000_000, 18),  # Dai et al. 2019, Table 1 (WikiText-103
    # large); its 18 layers (the adaptive embedding shared with the softmax not apart)
    "bert_large": (340_000_000, 24),  # Devlin et al. 2019: BERT-large, 24 layers
    "efficientnet_b0": (5_300_000, 18),  # Tan & Le 2019, Table 2; stem, 16 MBConv, head
    "efficientnet_b4": (19_000_000, 34),  # Tan & Le 2019, Table 2; stem, 32 MBConv, head
}
# Bucket bytes by library: DDP's bucket_cap_mb=25; Horovod's fusion buffer (64 MiB);
# TensorFlow's parameter-server modes and Caffe2 send each variable on its own as soon as
# it is ready; TensorFlow's replicated mode all-reduces the gradients once the backward
# pass is done, and so do DeepLearningExamples' BERT scripts after the last accumulated
# micro-batch (None: no overlap).
BUCKETS = {"ddp": 25 * 2**20, "horovod": 64 * 2**20, "per_variable": 1.0,
           "tf_replicated": None, "post_accumulation": None}


@dataclasses.dataclass(frozen=True)
class Case:
  """A published scaling measurement and its setup."""

  source: str
  where: str
  model: str
  batch: int  # per GPU (a micro-batch, with gradient accumulation)
  images_per_s: float  # one GPU at that batch, measured (`compute_from` says where)
  gpus: int
  per_node: int
  intra: tuple[float, str]  # (line rate bytes/s, transport) inside a node
  library: str  # key of BUCKETS
  published: float  # scaling efficiency (weak; strong where the accumulation falls)
  baseline_gpus: int = 1
  inter: tuple[float, str, str] | None = None  # (line rate, transport, topology)
  servers: int = 1  # parameter-server shards (a "ps" topology)
  colocated: bool = False  # the shards run on the workers' nodes
  round_robin: bool = False  # variables dealt to the shards in turn (TensorFlow's default)
  latency: float = 5e-6
  compute_from: str = "same table"
  family: str = ""  # the source and setup: docs/clock.md's families
  # Gradient accumulation: micro-batches per step at `gpus` and at `baseline_gpus` (strong
  # scaling: the global batch fixed, so fewer of them on more GPUs); the all-reduce runs
  # once per step.
  accumulation: int = 1
  baseline_accumulation: int = 1
  half_message: bool = False  # the gradients travel in half precision
  batch_name: str = ""  # the protocol's batch it came in ("": before the protocol)

  @property
  def name(self) -> str:
    return f"{self.source}: {self.model}, {self.gpus} GPUs ({self.where})"

  @property
  def first_look(self) -> float | None:
    """The predicted efficiency when the case was first scored (FIRST_LOOKS), or None."""
    return FIRST_LOOKS.get(self.name, (None, None))[0]


def _tf(model, batch, one, many, gpus, library, intra, **kw):
  mode = ("replicated with NCCL" if library == "tf_replicated"
          else "parameter server on the CPU")
  kw.setdefault("family", "tf, EC2 p2.8xlarge, distributed" if "inter" in kw
                else f"tf, DGX-1 P100, {mode}")
  kw.setdefault("colocated", "inter" in kw)  # "EC2 instances running worker servers
  # also ran parameter servers" (the benchmarks page, EC2 distributed details)
  kw.setdefault("round_robin", "inter" in kw)  # tf_cnn_benchmarks at the page's hash
  # (9165a70) places each variable with replica_device_setter's default round robin
  return Case("tf", kw.pop("where"), model, batch, one, gpus, 8, intra, library,
              round(many / (gpus * one), 4), **kw)


AWS_INTER = (10 / 8 * GB, "grpc", "ps")  # p2.8xlarge: 10 Gb/s; gRPC to the PS shards
CASES: tuple[Case, ...] = (
    # TensorFlow benchmarks, DGX-1 (8 P100), synthetic data: variables on the CPU
    # (parameter_server) reached over the 4 PCIe switches, or replicated with NCCL.
    _tf("resnet50", 64, 219, 1734, 8, "per_variable", (PCIE3, "pcie"), servers=4,
        where="DGX-1 P100, batch 64, parameter_server on CPU"),
    _tf("inception_v3", 64, 142, 1131, 8, "per_variable", (PCIE3, "pcie"), servers=4,
        where="DGX-1 P100, batch 64, parameter_server on CPU"),
    _tf("resnet152", 64, 91.8, 716, 8, "per_variable", (PCIE3, "pcie"), servers=4,
        where="DGX-1 P100, batch 64, parameter_server on CPU"),
    _tf("vgg16", 64, 154, 1081, 8, "tf_replicated", (NVLINK_P100, "tf_nccl"),
        where="DGX-1 P100, batch 64, replicated with NCCL"),
    _tf("vgg16", 32, 144, 820, 8, "tf_replicated", (NVLINK_P100, "tf_nccl"),
        where="DGX-1 P100, batch 32, replicated with NCCL"),
    # Amazon EC2 p2.8xlarge (8 K80 each), distributed_replicated: the GPUs of an
    # instance reduce over PCIe, the instances push to parameter-server shards. Every
    # row of more than one instance, in the page's order (model by model, then the batch
    # 32 table); as many shards as instances except where the page says otherwise
    # (InceptionV3: 8 instances / 6; ResNet-50 at batch 32: 8 / 4; ResNet-152: 8 / 4).
    *(_tf(model, batch, one, many, gpus, "per_variable", (PCIE3, "pcie"), inter=AWS_INTER,
          servers=servers, latency=20e-6,
          where=f"EC2 p2.8xlarge x {gpus // 8} ({servers} PS), batch {batch}, distributed")
      for model, batch, one, rows in (
          ("inception_v3", 64, 29.7, ((16, 459, 2), (32, 902, 4), (64, 1783, 6))),
          ("resnet50", 64, 52.4, ((16, 751, 2), (32, 1388, 4), (64, 2744, 8))),
          ("resnet152", 32, 19.4, ((16, 291, 2), (32, 565, 4), (64, 981, 4))),
          ("inception_v3", 32, 29.2, ((16, 427, 2), (32, 820, 4), (64, 1608, 6))),
          ("resnet50", 32, 48.4, ((16, 667, 2), (32, 1180, 4), (64, 2315, 4))))
      for gpus, many, servers in rows),
    # Horovod: servers of 4 Pascal GPUs on PCIe, 25 Gb/s RoCE between them, batch 64
    # (its benchmark command); one P100's throughput from the TensorFlow table above.
    *(Case("horovod", f"{gpus // 4} servers x 4 Pascal, 25 Gb/s RoCE", model, 64, one, gpus,
           4, (PCIE3, "pcie"), "horovod", published, inter=(25 / 8 * GB, "roce", "ring"),
           latency=2e-6, compute_from="one P100, TensorFlow benchmarks (DGX-1, batch 64)",
           family="horovod, 4-GPU servers, 25 Gb/s RoCE")
      for model, one, gpus, published in (("inception_v3", 142, 128, 0.90),
                                          ("inception_v3", 142, 512, 0.90),
                                          ("vgg16", 154, 128, 0.79),
                                          ("vgg16", 154, 512, 0.68))),
    # DeepLearningExamples: one DGX node, PyTorch DDP over NVLink (images/s, 1 and 8 GPUs).
    *(Case("dle", f"{machine}, {precision}, batch {batch}", "resnet50", batch, one, 8, 8,
           (link, "nvlink"), "ddp", round(many / (8 * one), 4),
           family=f"dle, {machine.split()[0] if 'A100' not in machine else 'DGX A100'}, DDP")
      for machine, precision, batch, one, many, link in (
          ("DGX-1 16GB", "FP32", 112, 367, 2855, NVLINK_V100),
          ("DGX-1 32GB", "FP32", 112, 356, 2766, NVLINK_V100),
          ("DGX-1 16GB", "AMP", 256, 1200, 8322, NVLINK_V100),
          ("DGX-1 32GB", "AMP", 256, 1156, 8056, NVLINK_V100),
          ("DGX A100 80GB", "TF32", 256, 938, 7248, NVLINK_A100),
          ("DGX A100 80GB", "AMP", 256, 2470, 16621, NVLINK_A100))),
    # Goyal et al.: Big Basin servers (8 P100, NVLink), 50 Gb/s Ethernet, Gloo's
    # recursive halving/doubling across servers, each layer reduced during backprop.
    Case("goyal", "32 servers x 8 P100, 50 Gb/s Ethernet, batch 32", "resnet50", 32, 195,
         256, 8, (NVLINK_P100, "nvlink"), "per_variable", 0.90, baseline_gpus=8,
         inter=(50 / 8 * GB, "tcp", "tree"), latency=20e-6,
         compute_from="one P100 at batch 32, TensorFlow benchmarks (DGX-1)",
         family="goyal, Big Basin, 50 Gb/s Ethernet"),
    # --- The protocol's batch 1 (docs/clock.md): entered before any of it was scored. ---
    # e-bug: EC2 p2.8xlarge (8 K80 each), TensorFlow 1.1, Inception V3 batch 64, synthetic
    # data; "nodes running Workers also run Parameter Servers"; the PS count of each row
    # as its table gives it; one GPU: 30.55 images/s (the table's 1-GPU row).
    *(Case("ebug", f"EC2 p2.8xlarge x {max(gpus // 8, 1)} ({servers} PS), batch 64",
           "inception_v3", 64, 30.55, gpus, 8, (PCIE3, "pcie"), "per_variable",
           round(many / (gpus * 30.55), 4), inter=AWS_INTER, servers=servers, colocated=True,
           round_robin=True, latency=20e-6, family="ebug, EC2 p2.8xlarge, distributed",
           batch_name="1")
      for gpus, servers, many in ((2, 1, 58.38), (4, 1, 116.34), (8, 1, 230.75),
                                  (16, 1, 448.57), (32, 3, 863.72), (64, 8, 1731.31),
                                  (128, 16, 3333.20))),
    # DeepLearningExamples, Transformer-XL large (PyTorch DDP, NCCL) on DGX-2H nodes of 16
    # V100 (NVSwitch), 8 EDR adapters each; 4 sequences of 384 tokens per GPU; the
    # baseline one node; one GPU: 5,169 (FP32) and 14,787 (mixed) tokens/s at batch 8.
    *(Case("dle_txl", f"{nodes} DGX-2H, {precision}, batch 4", "transformer_xl_large", 4,
           one / 384, 16 * nodes, 16, (NVLINK_V100, "nvlink"), "ddp",
           round(scaling / nodes, 4), baseline_gpus=16,
           inter=(DGX2_IB, "infiniband", "tree"), latency=1e-6,
           compute_from="one V100 at batch 8, the README's DGX-2H table",
           family="dle_txl, DGX-2H, DDP over InfiniBand", batch_name="1")
      for precision, one, rows in (("FP32", 5169, ((2, 1.98), (4, 3.91), (8, 7.45))),
                                   ("mixed", 14787, ((2, 1.98), (4, 3.91), (8, 7.68))))
      for nodes, scaling in rows),
    # DeepLearningExamples, BERT-large pre-training (PyTorch, LAMB) on DGX A100 nodes of 8
    # A100 (NVLink 3), 8 HDR adapters each. Strong scaling: each GPU's accumulated batch
    # halves as nodes double; steps = accumulated batch / batch per GPU (the table prints
    # TF32's batch as 126 and one mixed accumulation as 18, which its accumulated batches
    # contradict: read as 128 and 8). One GPU (sequences/s): 317 (TF32, batch 128) and 580
    # (mixed, 256) at length 128; 110 (16) and 210 (32) at length 512.
    *(Case("dle_bert", f"{nodes} DGX A100, {precision}, seq {length}, batch {batch}",
           "bert_large", batch, one, 8 * nodes, 8, (NVLINK_A100, "nvlink"),
           "post_accumulation", round(scaling / nodes, 4), baseline_gpus=8,
           inter=(DGXA100_IB, "infiniband", "tree"), latency=1e-6,
           accumulation=accumulated // batch, baseline_accumulation=base_accumulated // batch,
           half_message=precision == "mixed",
           compute_from="one A100, the README's single-node pre-training table",
           family="dle_bert, DGX A100, LAMB over InfiniBand", batch_name="1")
      for length, precision, batch, one, base_accumulated, rows in (
          (128, "mixed", 256, 580, 8192, ((2, 4096, 2.02), (4, 2048, 3.98), (8, 1024, 7.86),
                                         (16, 512, 15.50), (32, 256, 30.37))),
          (128, "TF32", 128, 317, 8192, ((2, 4096, 2.00), (4, 2048, 3.97), (8, 1024, 7.97),
                                        (16, 512, 15.63), (32, 256, 30.45))),
          (512, "mixed", 32, 210, 4096, ((2, 2048, 2.00), (4, 1024, 3.92), (8, 512, 7.89),
                                        (16, 256, 15.51), (32, 128, 30.13))),
          (512, "TF32", 16, 110, 4096, ((2, 2048, 1.97), (4, 1024, 3.86), (8, 512, 7.63),
                                       (16, 256, 14.21), (32, 128, 24.95))))
      for nodes, accumulated, scaling in rows),
    # DeepLearningExamples, EfficientNet v1 (TensorFlow2, Horovod) on DGX A100 (8 A100,
    # 8 HDR adapters) and DGX-1 (8 V100 32GB, 4 EDR adapters) nodes; the baseline one node
    # (8 GPUs); one GPU's rate: each table's 1-GPU row.
    *(Case("dle_efficientnet", f"{gpus // 8} {machine}, {precision}, batch {batch}", model,
           batch, one, gpus, 8, (link, "nvlink"), "horovod",
           round(many / eight / (gpus / 8), 4), baseline_gpus=8,
           inter=(across, "infiniband", "tree"), latency=1e-6,
           family=f"dle_efficientnet, {machine}, Horovod over InfiniBand", batch_name="1")
      for model, machine, precision, batch, one, eight, link, across, rows in (
          ("efficientnet_b0", "DGX A100", "TF32", 512, 1209, 9119, NVLINK_A100, DGXA100_IB,
           ((16, 17815),)),
          ("efficientnet_b0", "DGX A100", "mixed", 1024, 3454, 20647, NVLINK_A100,
           DGXA100_IB, ((16, 40644),)),
          ("efficientnet_b0", "DGX-1 V100", "FP32", 256, 752, 4504, NVLINK_V100, DGX1_IB,
           ((32, 15309),)),
          ("efficientnet_b0", "DGX-1 V100", "mixed", 512, 868, 4880, NVLINK_V100, DGX1_IB,
           ((32, 18424),)),
          ("efficientnet_b4", "DGX A100", "TF32", 80, 165, 1308, NVLINK_A100, DGXA100_IB,
           ((32, 4782), (64, 9473))),
          ("efficientnet_b4", "DGX A100", "mixed", 160, 470, 3550, NVLINK_A100, DGXA100_IB,
           ((32, 12908), (64, 25455))),
          ("efficientnet_b4", "DGX-1 V100", "FP32", 32, 79, 570, NVLINK_V100, DGX1_IB,
           ((32, 1855), (64, 3568))),
          ("efficientnet_b4", "DGX-1 V100", "mixed", 64, 211, 1258, NVLINK_V100, DGX1_IB,
           ((32, 4325), (64, 8643))))
      for gpus, many in rows),
)


def is_fitted(index: int) -> bool:
  """The constants' fit set: of the 31 cases before the protocol, the 1st, 3rd, 5th, ...
  (index 0, 2, 4, ...); no case of a later batch (none has been fitted on)."""
  return not CASES[index].batch_name and index % 2 == 0


@functools.lru_cache(maxsize=None)
def _profile(model: str) -> tuple[tuple[float, float], ...]:
  if model in _EQUAL_LAYERS:  # no flax model here: equal layers, in size and in work
    parameters, layers = _EQUAL_LAYERS[model]
    return tuple((4.0 * parameters / layers, (i + 1) / layers) for i in range(layers))
  from odsgd_jax.models import gradient_profile  # flax: only when a case needs it
  name, options = _PROFILES[model]
  return gradient_profile(name, (224, 224, 3), **dict(options))


def message_bytes(model: str) -> float:
  return sum(size for size, _ in _profile(model))


_RESNET_STAGES = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3),
                  "resnet152": (3, 8, 36, 3)}


@functools.lru_cache(maxsize=None)
def tf_variables(model: str) -> tuple[float, ...]:
  """Bytes of each variable tf_cnn_benchmarks (at the benchmarks page's hash) puts on the
  parameter servers, in the order it creates them: the global step first, then per
  convolution its kernel and batch norm's beta (and gamma for the ResNets, whose batch
  norm scales), then the classifier's weights and biases. Inception V3's layers are
  `_profile`'s; its betas and biases are taken as 0 bytes (< 0.1%)."""
  variables = [8.0]  # int64 global step
  if model == "inception_v3":
    for size, _ in reversed(_profile(model)):  # the forward order
      variables.extend((size, 0.0))
    return tuple(variables)

  def conv(inputs, outputs, size):
    variables.extend((4.0 * size * size * inputs * outputs, 4.0 * outputs, 4.0 * outputs))

  conv(3, 64, 7)
  channels = 64
  for blocks, depth in zip(_RESNET_STAGES[model], (256, 512, 1024, 2048), strict=True):
    for _ in range(blocks):  # ResNet v1 bottleneck: the projection first
      if channels != depth:
        conv(channels, depth, 1)
      conv(channels, depth // 4, 1)
      conv(depth // 4, depth // 4, 3)
      conv(depth // 4, depth, 1)
      channels = depth
  variables.extend((4.0 * 2048 * 1000, 4.0 * 1000))
  return tuple(variables)


def round_robin_share(variables: Sequence[float], servers: int) -> float:
  """The busiest shard's share of the bytes when variables are dealt to `servers`
  shards in turn (replica_device_setter's default strategy)."""
  loads = [sum(variables[shard::servers]) for shard in range(servers)]
  return max(loads) / sum(loads)


def network(case: Case, values: dict[str, float], gpus: int) -> Network:
  """The case's network with transports' achieved fractions (`values` overrides the
  fitted ones)."""
  def achieved(transport: str) -> float:
    return values.get(transport, TRANSPORTS[transport].value)

  intra_rate, intra_transport = case.intra
  if case.inter is None or gpus <= case.per_node:
    topology = "ps" if case.library == "per_variable" and case.servers > 1 else "ring"
    return Network(bandwidth=intra_rate, latency=case.latency, topology=topology,
                   efficiency=achieved(intra_transport), servers=case.servers)
  rate, transport, inter_topology = case.inter
  share = (round_robin_share(tf_variables(case.model), case.servers)
           if case.round_robin else None)
  return Network(bandwidth=rate, latency=case.latency, topology="hierarchical",
                 intra_bandwidth=intra_rate, workers_per_node=case.per_node,
                 inter_topology=inter_topology, efficiency=achieved(transport),
                 intra_efficiency=achieved(intra_transport), servers=case.servers,
                 colocated=case.colocated, shard_share=share)


def seconds_per_step(case: Case, gpus: int, values: dict[str, float], ticks: int = 64,
                     accumulation: int = 1) -> float:
  """Mean simulated seconds of an ssgd step of `gpus` workers, each computing
  `accumulation` micro-batches before the step's one exchange (same noise draws for every
  case: seed 0)."""
  samples = accumulation * case.batch
  workers = Workers((1.0,) * gpus, samples / case.images_per_s,
                    jitter=values.get("noise", NOISE.value),
                    node_size=min(case.per_node, gpus),
                    node_contention=values.get("node_contention", NODE_CONTENTION.value),
                    samples_per_step=samples,
                    interference=values.get("interference", INTERFERENCE.value))
  bucket = BUCKETS[case.library]
  # the backward pass that produces the gradients is the last micro-batch's: the rest of
  # the step is "forward" work that no bucket can overlap
  overlap = None if bucket is None else Overlap(
      backward_share=Overlap.backward_share / accumulation, bucket_bytes=bucket,
      gradients=_profile(case.model))
  timeline = SynchronousTimeline(workers, network(case, values, gpus),
                                 message_bytes(case.model) / (2 if case.half_message else 1),
                                 overlap)
  return float(np.mean([timeline.cost(tick).duration for tick in range(ticks)]))


def predict(case: Case, values: dict[str, float] | None = None) -> float:
  """The clock's scaling efficiency for the case: the time a micro-batch takes on the
  baseline over the time it takes on N GPUs (T(base) / T(N) without accumulation)."""
  values = fitted_values() if values is None else values
  base = seconds_per_step(case, case.baseline_gpus, values,
                          accumulation=case.baseline_accumulation)
  many = seconds_per_step(case, case.gpus, values, accumulation=case.accumulation)
  return (base / case.baseline_accumulation) / (many / case.accumulation)


IDEAL = {"noise": 0.0, "interference": 0.0, "node_contention": 0.0,
         **{name: 1.0 for name in TRANSPORTS}}


def errors(values: dict[str, float] | None = None, cases: Sequence[Case] = CASES) -> np.ndarray:
  """Predicted minus published efficiency, in points, per case."""
  return np.array([100 * (predict(case, values) - case.published) for case in cases])


GRIDS = {
    "noise": np.round(np.arange(0, 0.1001, 0.005), 4),
    "interference": np.round(np.arange(0, 1.0001, 0.05), 4),
    "node_contention": np.round(np.arange(0, 30.01e-6, 1.5e-6), 8),
    "pcie": np.round(np.arange(0.1, 1.0001, 0.05), 4),
    "tcp": np.round(np.arange(0.05, 1.0001, 0.05), 4),
    "grpc": np.round(np.arange(0.05, 1.0001, 0.05), 4),
    "tf_nccl": np.round(np.arange(0.05, 1.0001, 0.05), 4),
}


def fitted_cases() -> list[Case]:
  return [case for i, case in enumerate(CASES) if is_fitted(i)]


def fitted_error(values: dict[str, float], cases: Sequence[Case] | None = None) -> float:
  """Mean absolute error in points on `cases` (default: the fitted rows)."""
  cases = fitted_cases() if cases is None else cases
  return float(np.mean(np.abs(errors(values, cases))))


def fit(max_rounds: int = 20, cases: Sequence[Case] | None = None) -> dict[str, float]:
  """Coordinate descent over GRIDS from the ideal clock's values, minimizing the mean
  absolute error on `cases` (default: the fitted rows; ties: the smaller value), until a
  whole round moves no constant: every constant is then the best on its grid given the
  others."""
  values = {name: float(GRIDS[name][-1] if name in TRANSPORTS else GRIDS[name][0])
            for name in FITTED}
  for _ in range(max_rounds):
    before = dict(values)
    for name in FITTED:
      scores = [(fitted_error({**values, name: float(v)}, cases), float(v))
                for v in GRIDS[name]]
      values[name] = min(scores)[1]
    if values == before:
      return values
  raise RuntimeError(f"the fit did not settle in {max_rounds} rounds: {values}")


@dataclasses.dataclass(frozen=True)
class Fold:
  """One fold of the leave-one-family-out cross-validation: the constants fitted without
  `family`, and that family's errors (points) under them, by case name."""

  family: str
  values: dict[str, float]
  errors: dict[str, float]


def cross_validate(cases: Sequence[Case], fitted: Sequence[bool], fit_on=None,
                   predict_error=None) -> list[Fold]:
  """Leave one family out: for each family with a fitted case, `fit_on(training cases)`
  on the fitted cases of the other families, then `predict_error(values, case)` for every
  case of the family left out. Defaults: this module's `fit` and `errors`; a test passes
  its own, to check the folds by hand."""
  fit_on = fit_on or (lambda training: fit(cases=training))
  predict_error = predict_error or (lambda values, case: float(errors(values, [case])[0]))
  families = list(dict.fromkeys(c.family for c, f in zip(cases, fitted, strict=True) if f))
  folds = []
  for family in families:
    training = [c for c, f in zip(cases, fitted, strict=True) if f and c.family != family]
    values = fit_on(training)
    folds.append(Fold(family, values, {c.name: predict_error(values, c)
                                       for c in cases if c.family == family}))
  return folds


# The folds of the cross-validation over the cases the constants are fitted on (`python
# scripts/validate_clock.py --cross-validate` writes this file; tests/test_clock_terms.py
# checks that each fold's constants are its fit's optimum).
ERROR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clock_error.json")


def stored_folds() -> list[Fold]:
  """The cross-validation's folds as stored in ERROR_FILE ([] when it has not been run)."""
  if not os.path.exists(ERROR_FILE):
    return []
  with open(ERROR_FILE, encoding="utf-8") as f:
    return [Fold(**fold) for fold in json.load(f)["folds"]]


def out_of_family_error(folds: Sequence[Fold] | None = None) -> float:
  """The clock's out-of-family error in points: the mean absolute error of every case
  predicted by the fold that left its family out (nan before the cross-validation)."""
  folds = stored_folds() if folds is None else folds
  values = [abs(e) for fold in folds for e in fold.errors.values()]
  return float(np.mean(values)) if values else math.nan


def _fitted_transports(case: Case) -> set[str]:
  used = {case.intra[1]} | ({case.inter[1]} if case.inter else set())
  return used & set(FITTED)


def single_family_transports() -> dict[str, str]:
  """{transport: family} for each fitted transport share that only one fitted family
  informs: left out, nothing constrains it, and its fold measures a setup on a transport
  the clock has never seen."""
  families: dict[str, set[str]] = {}
  for case in fitted_cases():
    for transport in _fitted_transports(case):
      families.setdefault(transport, set()).add(case.family)
  return {t: next(iter(f)) for t, f in families.items() if len(f) == 1}


def known_transport_error(folds: Sequence[Fold] | None = None) -> float:
  """The out-of-family error of the families whose transports another fitted family
  informs (or a citation gives): the error to expect on a new setup whose transport's
  share is known, the band every scaling efficiency carries (nan before the
  cross-validation)."""
  folds = stored_folds() if folds is None else folds
  blind = set(single_family_transports().values())
  return out_of_family_error([fold for fold in folds if fold.family not in blind])


def constant_ranges(folds: Sequence[Fold] | None = None) -> dict[str, tuple[float, float]]:
  """Each fitted constant's range over the folds and its fitted value: the ends at which
  a speed verdict is recomputed."""
  folds = stored_folds() if folds is None else folds
  if not folds:
    raise ValueError(f"{ERROR_FILE} holds no cross-validation: run `python "
                     f"scripts/validate_clock.py --cross-validate` (about 25 minutes) first")
  fitted = fitted_values()
  return {name: (min([fitted[name], *[f.values[name] for f in folds]]),
                 max([fitted[name], *[f.values[name] for f in folds]])) for name in FITTED}
