"""Distributed update strategies, each an optax transformation run once per worker."""

from odsgd_jax.strategies._registry import STRATEGIES as STRATEGIES
from odsgd_jax.strategies._registry import StrategyDef as StrategyDef
from odsgd_jax.strategies._registry import get_strategy as get_strategy
from odsgd_jax.strategies._ssgd import SsgdState as SsgdState
from odsgd_jax.strategies._ssgd import ssgd as ssgd
from odsgd_jax.strategies._ssgd import ssgd_model_params as ssgd_model_params
