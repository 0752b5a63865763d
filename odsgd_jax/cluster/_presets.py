"""Named networks as clusters are built, and reference workloads, each number with its source.

A preset fixes the network (`cluster.preset=<name>` in a config); a workload fixes
what one worker computes and sends per step (the message of a real model, the
compute time of a real accelerator), so that the simulated clock can time a large
model while the math runs a small one. The "Presets" table of docs/cluster.md is printed
from here (`python scripts/scaling.py`).
"""

import dataclasses
from typing import Any

from odsgd_jax.cluster._calibration import TRANSPORTS
from odsgd_jax.cluster._hardware import Network


@dataclasses.dataclass(frozen=True)
class Preset:
  """A network as a cluster is built, with where each number comes from."""

  network: Network
  description: str
  sources: str
  # The transports whose achieved shares give the links' efficiency (across nodes and,
  # hierarchical, inside them; None: the bandwidth as given). A config or a robustness
  # check that changes a share changes these links (`cluster.network_from_config`).
  transport: str | None = None
  intra_transport: str | None = None


PRESETS: dict[str, Preset] = {
    "10gbe": Preset(
        Network(bandwidth=1.25e9, latency=20e-6, topology="tree",
                efficiency=TRANSPORTS["tcp"].value),
        "commodity 10 Gigabit Ethernet, one NIC per worker, NCCL-style tree all-reduce",
        "10 Gb/s line rate (IEEE 802.3ae), of which TCP reaches the fitted `tcp` share; "
        "20 us per message: typical one-way latency of "
        "MPI/NCCL over kernel TCP sockets (an order of magnitude, not a measurement of ours)",
        transport="tcp"),
    "ib_edr": Preset(
        Network(bandwidth=12.5e9, latency=1e-6, topology="tree",
                efficiency=TRANSPORTS["infiniband"].value),
        "100 Gb/s InfiniBand EDR, one adapter per worker, tree all-reduce",
        "4x EDR: 4 lanes x 25 Gb/s = 100 Gb/s = 12.5 GB/s (InfiniBand Trade Association "
        "roadmap) at NCCL's achieved `infiniband` share; "
        "1 us MPI one-way latency (ConnectX-4 class adapters: ~0.6 us in the "
        "adapter, plus the MPI stack)", transport="infiniband"),
    "dgx1_ib": Preset(
        Network(bandwidth=50e9, latency=1e-6, topology="hierarchical", intra_bandwidth=150e9,
                workers_per_node=8, inter_topology="tree",
                efficiency=TRANSPORTS["infiniband"].value,
                intra_efficiency=TRANSPORTS["nvlink"].value),
        "8-GPU NVLink nodes (DGX-1 V100) with InfiniBand EDR between nodes: ring inside "
        "the node, tree across nodes",
        "inside: 6 NVLink 2.0 links x 25 GB/s = 150 GB/s per GPU and direction (NVIDIA "
        "DGX-1 with Tesla V100 system architecture white paper: 300 GB/s bidirectional); "
        "across: 4 EDR adapters per node x 12.5 GB/s = 50 GB/s (same white paper); each at "
        "its transport's achieved share (`nvlink`, `infiniband`); 1 us latency as ib_edr",
        transport="infiniband", intra_transport="nvlink"),
    "tpu_v4": Preset(
        Network(bandwidth=268.6e9, latency=1e-6, topology="torus"),
        "TPU v4 chips on the inter-chip interconnect (ICI), a 3-D torus",
        "all-reduce bandwidth 1.1 PB/s per pod of 4096 chips = 268.6 GB/s per chip "
        "(Google Cloud TPU v4 documentation, key specifications); 1 us per hop is our "
        "assumption (the documentation gives no latency)"),
    "tianhe2": Preset(
        Network(bandwidth=6.34e9, latency=1.57e-6, topology="tree"),
        "Tianhe-2's TH Express-2 (fat tree, offloaded collectives), one worker per node",
        "1.57 us latency: Dongarra, Report on the Tianhe-2A system, ICL-UT-17-04 (2017), "
        "Table 0-1; bandwidth: the measured MPI unidirectional bandwidth of the TH Express "
        "interconnect, 6,340 MB/s (Xie et al., Tianhe-1A interconnect and message-passing "
        "services, IEEE Micro 32(1), 2012), as we found no sustained figure for TH "
        "Express-2, whose links are faster: a conservative stand-in"),
}


@dataclasses.dataclass(frozen=True)
class Workload:
  """What one worker computes and sends per step, and the model whose gradients those
  are (their backward order: `odsgd_jax.models.gradient_profile(*model)`)."""

  step_time: float  # seconds of one step at speed 1
  message_bytes: float  # one float32 copy of the model's parameters
  description: str
  model: tuple[str, tuple[int, ...]]  # (model name, input shape)
  samples_per_step: int  # the batch the step time was measured at
  # the model's outputs and options, for its gradients' backward order
  num_classes: int = 1000
  model_options: tuple[tuple[str, Any], ...] = ()
  flops_per_step: float = 0.0  # of one worker's step, where the workload states it


def gpt2_parameters(vocabulary: int, context: int, width: int, depth: int) -> int:
  """Parameters of a GPT-2 decoder (Radford et al. 2019; `models.Transformer` with tied
  embeddings): token and position embeddings, per block two LayerNorms (2 x 2d), the
  attention's q, k, v and output projections with biases (4d^2 + 4d) and the MLP's
  d -> 4d -> d with biases (8d^2 + 5d), and the final LayerNorm."""
  per_block = 12 * width**2 + 13 * width
  return vocabulary * width + context * width + depth * per_block + 2 * width


def gpt2_training_flops(vocabulary: int, context: int, width: int, depth: int,
                        tokens: int) -> float:
  """FLOPs of one training step (forward and backward) over `tokens` tokens: 6 per
  parameter met per token (the blocks' and the output projection's; the embedding is a
  lookup) and 6 * 2 * depth * context * width for the attention's scores and mixing
  (Kaplan et al. 2020, Table 1, with the backward pass twice the forward)."""
  matmul_parameters = depth * 12 * width**2 + vocabulary * width
  return tokens * (6.0 * matmul_parameters + 12.0 * depth * context * width)


# GPT-2 small: the 124M decoder of the llm.c reproduction (vocabulary 50,257, 1,024
# positions, width 768, 12 blocks of 12 heads)
_GPT2 = {"vocabulary": 50_257, "context": 1_024, "width": 768, "depth": 12}
_GPT2_TOKENS = 64 * 1_024  # per GPU and step: micro-batch 64 of 1,024 tokens
# 10B tokens at 524,288 a step (64 x 1,024 on each of 8 GPUs) is 19,073 steps; the
# reproduction took about 90 minutes on one 8x A100 80GB SXM node (Karpathy, "Reproducing
# GPT-2 (124M) in llm.c in 90 minutes for $20", llm.c discussion #481, May 2024), so a
# step took 5400 / 19,073 s with its all-reduce on NVLink inside: an upper bound on the
# compute, at about 63% of the A100's 312 TFLOP/s in bf16 (the discussion's "~60% MFU")
_GPT2_STEP = 90 * 60 / 19_073


WORKLOADS: dict[str, Workload] = {
    "resnet50_v100": Workload(
        step_time=112 / 367, message_bytes=25_557_032 * 4,
        description="ResNet-50 (25,557,032 float32 parameters, 102.2 MB), batch 112 per "
                    "worker on a V100 in FP32: 367 images/s (NVIDIA DeepLearningExamples, "
                    "ResNet50 v1.5 for PyTorch, DGX-1 16GB, 1 GPU, at the FP32 batch of its "
                    "configs.yml), 305.2 ms per step",
        model=("resnet50", (224, 224, 3)), samples_per_step=112),
    "gpt2_124m_a100": Workload(
        step_time=_GPT2_STEP, message_bytes=gpt2_parameters(**_GPT2) * 4,
        description=f"GPT-2 small ({gpt2_parameters(**_GPT2):,} float32 parameters, "
                    f"{gpt2_parameters(**_GPT2) * 4 / 1e6:.1f} MB; vocabulary 50,257, 1,024 "
                    f"positions, width 768, 12 blocks), 64 sequences of 1,024 tokens per "
                    f"worker on an A100 80GB SXM in bf16: llm.c's reproduction, 10B tokens "
                    f"in about 90 minutes on 8 GPUs (Karpathy, llm.c discussion #481), "
                    f"{_GPT2_STEP * 1e3:.1f} ms per step",
        model=("transformer", (_GPT2["context"],)), samples_per_step=64,
        num_classes=_GPT2["vocabulary"],
        model_options=(("width", _GPT2["width"]), ("depth", _GPT2["depth"]),
                       ("heads", 12), ("max_length", _GPT2["context"])),
        flops_per_step=gpt2_training_flops(**_GPT2, tokens=_GPT2_TOKENS)),
}


def get_preset(name: str) -> Preset:
  if name not in PRESETS:
    raise KeyError(f"unknown cluster preset {name!r}; choose one of {sorted(PRESETS)}")
  return PRESETS[name]
