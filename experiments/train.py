"""Trains one experiment.

  python -m experiments.train --config configs/default.py --workdir runs/default \
      [--config.optimizer.learning_rate=0.05 ...]

A workdir that holds a checkpoint resumes from it. A bad config, a missing data
set or a diverging run stops with one message (exit status 1), never a traceback.
"""

import sys

from absl import app, flags, logging
from ml_collections import config_flags

from odsgd_jax.data import DataError
from odsgd_jax.train import ConfigError, NonFiniteLossError, train_and_evaluate

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config file (configs/*.py).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for checkpoints, metrics and summary.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  try:
    summary = train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  except (ConfigError, DataError, NonFiniteLossError) as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
  logging.info("finished: %s", summary)
  print(f"test accuracy {summary['test_accuracy']:.4f} after {summary['steps']} steps "
        f"({summary['wall_time_s']:.0f} s); summary in {_WORKDIR.value}/summary.json")


if __name__ == "__main__":
  app.run(main)
