"""The largest stable step size of every strategy and delay correction on a noiseless quadratic.

  python scripts/stability.py [--readme]

Runs each strategy's optax transformation itself (odsgd_jax.study.largest_stable_step:
2 identical workers, f(x) = x^2 / 2, bisection on the step size) with heavy-ball inner
optimizers of momentum 0, 0.5 and 0.9, and prints the largest stable eta * h next to the
analytic values where they are known: synchronous 2 (1 + mu), one step late 1 - mu.
"""


from odsgd_jax import study

MOMENTA = (0.0, 0.5, 0.9)
ROWS = [  # (label, strategy, options, analytic eta h as a function of mu, or None)
    ("ssgd", "ssgd", {}, lambda mu: 2 * (1 + mu)),
    ("odsgd, local_lr=0 (one step late)", "odsgd", {"local_lr": 0.0, "warmup_steps": 0},
     lambda mu: 1 - mu),
    ("odsgd, local sgd (local_lr=0.1)", "odsgd", {"local_lr": 0.1, "warmup_steps": 0}, None),
    ("odsgd, local sgd + spike", "odsgd",
     {"local_lr": 0.1, "warmup_steps": 0, "correction": "spike"}, None),
    ("odsgd, local sgd + predict", "odsgd",
     {"local_lr": 0.1, "warmup_steps": 0, "correction": "predict"}, None),
    ("odsgd, replay", "odsgd", {"local_lr": 0.0, "warmup_steps": 0,
                                "local_optimizer": "replay"}, lambda mu: 2 * (1 + mu)),
    ("pseudo_sync, fixed alpha=1 (one step late)", "pseudo_sync",
     {"confidence": "fixed", "alpha": 1.0}, lambda mu: 1 - mu),
    ("pseudo_sync, fixed alpha=0.5", "pseudo_sync", {"confidence": "fixed", "alpha": 0.5}, None),
    ("pseudo_sync, adaptive (alpha_min=0.5)", "pseudo_sync", {"alpha_min": 0.5}, None),
    ("pseudo_sync, alpha=1 + predict", "pseudo_sync",
     {"confidence": "fixed", "alpha": 1.0, "correction": "predict"}, None),
    ("pseudo_sync, alpha=1 + spike", "pseudo_sync",
     {"confidence": "fixed", "alpha": 1.0, "correction": "spike"}, None),
    ("pseudo_sync, alpha=1 + predict+spike", "pseudo_sync",
     {"confidence": "fixed", "alpha": 1.0, "correction": "predict+spike"}, None),
    ("pseudo_sync, alpha=1 + replay", "pseudo_sync",
     {"confidence": "fixed", "alpha": 1.0, "correction": "replay"}, lambda mu: 2 * (1 + mu)),
    ("pseudo_sync, adaptive + replay", "pseudo_sync",
     {"alpha_min": 0.5, "correction": "replay"}, None),
    ("asgd (2 workers: one update late)", "asgd", {}, lambda mu: 1 - mu),
    ("asgd + predict", "asgd", {"correction": "predict"}, None),
    ("asgd + spike", "asgd", {"correction": "spike"}, None),
    ("asgd + predict+spike", "asgd", {"correction": "predict+spike"}, None),
    ("local_sgd (period 4)", "local_sgd", {"period": 4}, lambda mu: 2 * (1 + mu)),
]


def table() -> str:
  header = ["strategy and options"] + [f"mu = {mu}: measured (analytic)" for mu in MOMENTA]
  rows = []
  for label, strategy, options, analytic in ROWS:
    cells = [label]
    for mu in MOMENTA:
      try:  # the corrections are told the inner optimizer's momentum
        measured = study.largest_stable_step(strategy, {**options, **_momentum(strategy, mu)},
                                             mu)
      except ValueError:  # the strategy's own check refuses it (spike without momentum)
        cells.append("-")
        continue
      cells.append(f"{measured:.3f}" + (f" ({analytic(mu):.3f})" if analytic else ""))
    rows.append(cells)
  return (f"Largest stable eta * h on f(x) = h x^2 / 2 with 2 identical workers and a "
          f"heavy-ball inner optimizer of momentum mu, found by bisection on the step size "
          f"running the strategies' own transformations; analytic values in parentheses; "
          f"\"-\": a setting the strategy refuses (spike compensation without momentum, "
          f"where it would change nothing); "
          f"{study.environment()}; produced by `python scripts/stability.py`."
          f"\n\n{study.markdown(header, rows)}")


def _momentum(strategy: str, mu: float) -> dict[str, float]:
  return {"inner_momentum": mu} if strategy in ("odsgd", "pseudo_sync", "asgd") else {}


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--readme", action="store_true", help="write the section of docs/delays.md")
  args = parser.parse_args()
  text = table()
  print(text)
  if args.readme:
    study.replace_section("stability", text)


if __name__ == "__main__":
  study.run_main(main)
