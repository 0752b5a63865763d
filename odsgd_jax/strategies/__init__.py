"""Distributed update strategies, each an optax transformation run once per worker."""

from odsgd_jax.strategies._asgd import AsgdState as AsgdState
from odsgd_jax.strategies._asgd import asgd as asgd
from odsgd_jax.strategies._local_sgd import LocalSgdState as LocalSgdState
from odsgd_jax.strategies._local_sgd import local_sgd as local_sgd
from odsgd_jax.strategies._local_sgd import oscars as oscars
from odsgd_jax.strategies._odsgd import OdsgdState as OdsgdState
from odsgd_jax.strategies._odsgd import odsgd as odsgd
from odsgd_jax.strategies._pending import SMALL_TENSOR_BYTES as SMALL_TENSOR_BYTES
from odsgd_jax.strategies._pseudo_sync import PseudoSyncState as PseudoSyncState
from odsgd_jax.strategies._pseudo_sync import pseudo_sync as pseudo_sync
from odsgd_jax.strategies._registry import STRATEGIES as STRATEGIES
from odsgd_jax.strategies._registry import StrategyDef as StrategyDef
from odsgd_jax.strategies._registry import get_strategy as get_strategy
from odsgd_jax.strategies._ssgd import SsgdState as SsgdState
from odsgd_jax.strategies._ssgd import ssgd as ssgd
from odsgd_jax.strategies._ssgd import ssgd_model_params as ssgd_model_params
from odsgd_jax.strategies._ssp import SspState as SspState
from odsgd_jax.strategies._ssp import ssp as ssp
from odsgd_jax.strategies._state_size import state_model_copies as state_model_copies
