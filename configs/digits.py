"""scikit-learn 8x8 digits, LeNet-5, 8 workers, any strategy (offline, CPU):

  python -m experiments.train --config configs/digits.py:pseudo_sync --workdir runs/digits_ps

The text after ":" names the strategy (default ssgd).
"""

from configs import _strategies, digits_ssgd


def get_config(arg: str = "ssgd"):
  return _strategies.with_arg(digits_ssgd.get_config(), arg)
