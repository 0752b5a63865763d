"""The language model (configs/kjv_transformer.py: a character-level transformer on the King
James Bible, AdamW, GPT-2 small's step on 10 GbE) on the heterogeneous cluster of
configs/oscars_heterogeneous.py: 8 workers at speeds 1,1,1,1,0.5,0.5,0.25,0.25.

  python -m experiments.train --config configs/kjv_transformer_heterogeneous.py:oscars \\
      --workdir runs/lm_oscars
"""

from configs import kjv_transformer, oscars_heterogeneous


def get_config(arg: str = "oscars"):
  config = kjv_transformer.get_config(arg)
  config.cluster.speeds = oscars_heterogeneous.SPEEDS
  return config
