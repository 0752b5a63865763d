"""The language model (issue 76): the decoder-only transformer learning next-token
prediction on the tiny generated corpus, with every registered strategy."""

import ml_collections
import numpy as np
import pytest

from configs import _strategies, default
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.train import read_metrics, train_and_evaluate


def _tiny_lm_config(strategy: str, data_dir: str) -> ml_collections.ConfigDict:
  config = _strategies.use_strategy(default.get_config(), strategy)
  config.data.name, config.data.data_dir = "kjv_tiny", data_dir
  config.data.batch_size = 32  # 4 windows of 32 tokens per worker
  config.model = ml_collections.ConfigDict({"name": "transformer", "width": 32, "depth": 1,
                                            "heads": 2, "max_length": 32})
  # AdamW, as language models are trained, inside every strategy; spike compensation
  # corrects heavy-ball momentum, which AdamW has not (docs/strategies.md)
  config.optimizer.name, config.optimizer.learning_rate = "adamw", 0.01
  config.optimizer.weight_decay, config.optimizer.clip_norm = 0.1, 1.0
  config.optimizer.schedule, config.optimizer.warmup_steps = "cosine", 2
  if strategy == "odsgd":
    config.strategy.correction = "none"
  if strategy == "pseudo_sync":
    config.strategy.correction = "replay"
  config.train.num_steps, config.train.eval_every, config.train.log_every = 12, 12, 1
  config.train.progress_bar = False
  return config


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_trains_the_transformer_with_adamw_with_a_finite_falling_loss(
    strategy, tmp_path_factory):
  data_dir = str(tmp_path_factory.getbasetemp() / "kjv_tiny_data")  # built once a worker
  workdir = tmp_path_factory.mktemp(strategy)
  summary = train_and_evaluate(_tiny_lm_config(strategy, data_dir), str(workdir))
  losses = np.array([row["loss"] for row in read_metrics(str(workdir)) if "loss" in row])
  assert np.isfinite(losses).all() and len(losses) == 12
  assert losses[-3:].mean() < losses[:3].mean(), losses
  assert np.isfinite(summary["validation_loss"]) and np.isfinite(summary["test_loss"])
