"""Trains one experiment.

  python -m experiments.train --config configs/default.py --workdir runs/default \
      [--config.optimizer.learning_rate=0.05 ...]

A workdir that holds a checkpoint resumes from it. A bad config, a missing data
set or a diverging run stops with one message (exit status 1), never a traceback.
"""

import re
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from odsgd_jax.data import DataError
from odsgd_jax.train import ConfigError, NonFiniteLossError, train_and_evaluate

# New attributes are accepted so that options of the chosen model or strategy can be
# set without being listed in the file (--config.model.hidden_sizes=(64,)); a
# misspelt field is caught by validate_config, which names it and suggests the fix.
_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config file (configs/*.py).", lock_config=False,
    accept_new_attributes=True,
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for checkpoints, metrics and summary.")
flags.mark_flags_as_required(["config", "workdir"])


def _parse_flags(argv):
  """absl's parser, with a misspelt --config.a.b=v reported as one line."""
  try:
    return app.parse_flags_with_usage(argv)
  except (AttributeError, KeyError) as error:  # raised by the locked config override
    text = str(error).replace("\\'", "'")
    unknown = re.search(r"'(\w+)'", text)
    suggestion = re.search(r'Did you mean "(\w+)"', text)
    field = unknown.group(1) if unknown else text
    culprit = [a for a in argv[1:] if a.startswith("--config.") and field in a.split("=")[0]]
    hint = f"; did you mean {suggestion.group(1)!r}?" if suggestion else ""
    print(f"error: {culprit[0].split('=')[0] if culprit else '--config'} names no config field "
          f"({field!r} does not exist){hint}", file=sys.stderr)
    sys.exit(1)


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
  app.run(main, flags_parser=_parse_flags)
