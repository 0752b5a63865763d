"""Strategy state per worker, in model copies, for the default inner optimizer.

  python scripts/state_sizes.py [--readme]

Measured from the pytree of `tx.init(params)` (shapes only, nothing is run) for
CNN1D (the default model) and ResNet-20; prints the table, and with --readme writes it
into docs/strategies.md.
"""


import jax
import jax.numpy as jnp

from configs import default
from odsgd_jax.models import make_model
from odsgd_jax.strategies import STRATEGIES, resolve, state_model_copies
from odsgd_jax.study import replace_section, run_main, script_parser
from odsgd_jax.train import make_inner_optimizer, make_lr_schedule

MODELS = {"cnn1d": (40,), "resnet20": (32, 32, 3)}


def measure() -> dict[str, dict[str, float]]:
  config = default.get_config()
  inner = make_inner_optimizer(config.optimizer, make_lr_schedule(config.optimizer, 100, 10))
  copies = {}
  for name in STRATEGIES:
    options = dict(STRATEGIES[name].defaults or {})
    tx = resolve(name, options).make(inner, "workers")
    copies[name] = {}
    for model_name, shape in MODELS.items():
      model = make_model(model_name, 10)
      variables = jax.eval_shape(lambda m=model, s=shape: m.init(jax.random.key(0),
                                                                  jnp.zeros((1, *s)), train=False))
      state = jax.eval_shape(tx.init, variables["params"])
      copies[name][model_name] = state_model_copies(state, variables["params"])
  return copies


def main() -> None:
  parser = script_parser(__doc__)
  parser.add_argument("--readme", action="store_true",
                      help="also write the section of docs/strategies.md")
  args = parser.parse_args()
  config = default.get_config()
  copies = measure()
  lines = [
      f"Per-worker strategy state with the default inner optimizer (sgd, momentum "
      f"{config.optimizer.momentum}), in copies of the model's parameters; produced by "
      f"`python scripts/state_sizes.py --readme`.",
      "",
      "| strategy | options | CNN1D | ResNet-20 |",
      "|---|---|---|---|",
  ]
  for name, by_model in copies.items():
    options = ", ".join(f"{k}={v}" for k, v in (STRATEGIES[name].defaults or {}).items())
    lines.append(f"| {name} | {options or '-'} | {by_model['cnn1d']:.2f} | "
                 f"{by_model['resnet20']:.2f} |")
  print("\n".join(lines))
  if args.readme:
    replace_section("state-sizes", "\n".join(lines))


if __name__ == "__main__":
  run_main(main)
