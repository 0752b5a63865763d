"""Simulated cluster: worker speeds, network costs, and per-strategy timelines that
produce each tick's schedule and its simulated duration."""

from odsgd_jax.cluster import _calibration as calibration  # noqa: F401 (re-exported)
from odsgd_jax.cluster._calibration import TRANSPORTS as TRANSPORTS
from odsgd_jax.cluster._config import ClusterSpec as ClusterSpec
from odsgd_jax.cluster._config import from_config as from_config
from odsgd_jax.cluster._config import network_from_config as network_from_config
from odsgd_jax.cluster._config import overlap_from_config as overlap_from_config
from odsgd_jax.cluster._config import transports_of as transports_of
from odsgd_jax.cluster._hardware import INTER_TOPOLOGIES as INTER_TOPOLOGIES
from odsgd_jax.cluster._hardware import TOPOLOGIES as TOPOLOGIES
from odsgd_jax.cluster._hardware import Network as Network
from odsgd_jax.cluster._hardware import Workers as Workers
from odsgd_jax.cluster._presets import PRESETS as PRESETS
from odsgd_jax.cluster._presets import WORKLOADS as WORKLOADS
from odsgd_jax.cluster._presets import Preset as Preset
from odsgd_jax.cluster._presets import Workload as Workload
from odsgd_jax.cluster._presets import get_preset as get_preset
from odsgd_jax.cluster._schedule import Schedule as Schedule
from odsgd_jax.cluster._schedule import schedule_or_default as schedule_or_default
from odsgd_jax.cluster._schedule import synchronous_schedule as synchronous_schedule
from odsgd_jax.cluster._timelines import *  # noqa: F403 (the rules its __all__ lists)
