"""Distributed update strategies, each an optax transformation run once per worker.

A strategy is one file of this package that ends with its `register(StrategyDef(...))`;
every module here is imported below, so a new strategy changes no other file."""

import importlib as _importlib
import pkgutil as _pkgutil

# The strategies in the order tables list them (registration order: ssgd, the baseline,
# first); a strategy added as a file of its own registers after them.
from odsgd_jax.strategies._ssgd import SsgdState as SsgdState
from odsgd_jax.strategies._ssgd import ssgd as ssgd
from odsgd_jax.strategies._ssgd import ssgd_model_params as ssgd_model_params
from odsgd_jax.strategies._asgd import AsgdState as AsgdState
from odsgd_jax.strategies._asgd import asgd as asgd
from odsgd_jax.strategies._ssp import SspState as SspState
from odsgd_jax.strategies._ssp import ssp as ssp
from odsgd_jax.strategies._odsgd import OdsgdState as OdsgdState
from odsgd_jax.strategies._odsgd import odsgd as odsgd
from odsgd_jax.strategies._pseudo_sync import PseudoSyncState as PseudoSyncState
from odsgd_jax.strategies._pseudo_sync import pseudo_sync as pseudo_sync
from odsgd_jax.strategies._rounds import LocalSgdState as LocalSgdState
from odsgd_jax.strategies._local_sgd import local_sgd as local_sgd
from odsgd_jax.strategies._oscars import oscars as oscars
from odsgd_jax.strategies import _gossip  # noqa: F401 (registers gossip)
from odsgd_jax.strategies._harness import AXIS as AXIS
from odsgd_jax.strategies._harness import init_workers as init_workers
from odsgd_jax.strategies._harness import worker_ticks as worker_ticks
from odsgd_jax.strategies._definition import EVERY_TICK as EVERY_TICK
from odsgd_jax.strategies._definition import Example as Example
from odsgd_jax.strategies._definition import StrategyDef as StrategyDef
from odsgd_jax.strategies._definition import communication_field as communication_field
from odsgd_jax.strategies._registry import STRATEGIES as STRATEGIES
from odsgd_jax.strategies._registry import get_strategy as get_strategy
from odsgd_jax.strategies._registry import register as register
from odsgd_jax.strategies._validation import overlap_problem as overlap_problem
from odsgd_jax.strategies._spec import StrategySpec as StrategySpec
from odsgd_jax.strategies._spec import resolve as resolve
from odsgd_jax.strategies._state_size import state_model_copies as state_model_copies
from odsgd_jax.strategies import _ticks as ticks  # noqa: F401 (re-exported)

for _module in _pkgutil.iter_modules(__path__):  # each strategy file registers itself
  _importlib.import_module(f"{__name__}.{_module.name}")
