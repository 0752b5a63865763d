"""The clock's terms beyond bandwidth and latency, each value with where it comes from.

Cited values come from published measurements. The rest were fitted once, for all cases
alike, on the fitted half of the published scaling measurements in
odsgd_jax/cluster/validation.py (`python scripts/validate_clock.py --fit` prints
them; tests/test_clock_terms.py checks that the values here are its output), and
are judged on the other, held-out half (docs/clock.md).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Term:
  value: float
  source: str
  fitted: bool = False


# Sigma of the lognormal noise on every worker's step time (a coefficient of variation
# of about the same size). We found no per-step variability of GPU training published
# with its setup that we could cite, so it is fitted.
NOISE = Term(0.01, "fitted on the validation set's fitted half", fitted=True)

# Seconds of compute delay per second of communication running beside the compute.
INTERFERENCE = Term(0.35, "fitted on the validation set's fitted half", fitted=True)

# Seconds a worker loses per sample of every further worker on its node (host CPU,
# PCIe, input pipeline shared).
NODE_CONTENTION = Term(4.5e-6, "fitted on the validation set's fitted half", fitted=True)

# Achieved fraction of a link's line rate, by transport.
TRANSPORTS: dict[str, Term] = {
    "line_rate": Term(1.0, "the link's line rate (the clock before validation)"),
    "measured": Term(1.0, "the bandwidth given is already a measured achieved bandwidth"),
    "nvlink": Term(0.82, "NCCL reaches about 80% of NVLink's line rate (370 of 450 GB/s on "
                         "H100: S. Jeaugey, NCCL maintainer, NVIDIA/nccl-tests issue #212, "
                         "2024: ~20% protocol overhead)"),
    "infiniband": Term(0.8, "NCCL all-reduce bus bandwidth about 40 GB/s across DGX-1 "
                            "nodes with 4 x EDR InfiniBand (50 GB/s line rate): NCCL 2 "
                            "presentation, GTC 2017 (S7155, Jeaugey), as quoted in "
                            "NVIDIA/nccl-tests issue #29"),
    "roce": Term(0.8, "RDMA over Converged Ethernet: NCCL's InfiniBand verbs transport, "
                      "taken as InfiniBand's"),
    "pcie": Term(1.0, "fitted on the validation set's fitted half", fitted=True),
    "tcp": Term(1.0, "fitted on the validation set's fitted half (collectives over TCP "
                     "sockets: NCCL's socket transport, Gloo)", fitted=True),
    "grpc": Term(0.4, "fitted on the validation set's fitted half (TensorFlow's gRPC "
                      "transfers to parameter servers, 2017)", fitted=True),
    "tf_nccl": Term(0.15, "fitted on the validation set's fitted half (TensorFlow's 2017 "
                         "NCCL 1 all-reduce of its replicated mode, over NVLink)", fitted=True),
}

FITTED = ("noise", "interference", "node_contention", "pcie", "tcp", "grpc", "tf_nccl")


def fitted_values() -> dict[str, float]:
  """The fitted constants by name (FITTED)."""
  return {"noise": NOISE.value, "interference": INTERFERENCE.value,
          "node_contention": NODE_CONTENTION.value,
          **{name: TRANSPORTS[name].value for name in FITTED if name in TRANSPORTS}}
