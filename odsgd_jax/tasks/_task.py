"""The task seam: everything the train step, evaluation and the studies know of what a
model learns."""

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Metric:
  """A metric a target or a verdict reads.

  Attributes:
    name: the metric's name in the evaluation rows (`validation_<name>`).
    higher_is_better: accuracy rises as a model learns, a loss falls.
    unit: what a difference of it is written in ("points": hundredths of accuracy; "nats").
    scale: a difference in `unit` is this times the metric's difference.
    margin: how far short of the baseline a strategy may end and still be "similar" (a
      study's non-inferiority margin), in the metric's own terms: fixed before any run.
    digits: the decimals a difference in `unit` is written with.
  """

  name: str
  higher_is_better: bool
  unit: str
  scale: float = 1.0
  margin: float = 0.0
  digits: int = 3

  @property
  def worse(self) -> str:
    """The word for a strategy that ends worse than its baseline."""
    return "lower" if self.higher_is_better else "higher"

  def oriented(self, value: float) -> float:
    """`value` turned so that higher is better: what targets, the best evaluation and the
    verdicts compare (a loss is negated)."""
    return value if self.higher_is_better else -value


class Task:
  """A task: the model's input in a batch, the loss, and the metrics.

  A batch is a dict of arrays with a leading example axis. Subclass and register
  (`register_task`) to bring a task of your own; `DatasetSpec.task` names a data set's.
  """

  name: str = ""
  input_key: str = ""  # the batch's entry the model reads
  input_dtype: Any = jnp.float32
  metrics: tuple[str, ...] = ("loss",)  # evaluated on a whole split, by name
  target: Metric = Metric("loss", higher_is_better=False, unit="nats")

  def chance_level(self, num_classes: int) -> float:
    """The target metric of a uniform guess over `num_classes` outputs: what a study counts
    a diverged seed as. By default an accuracy's (1 / classes) for a metric that rises, the
    uniform distribution's cross-entropy (ln classes) for one that falls."""
    return 1 / num_classes if self.target.higher_is_better else math.log(num_classes)

  def inputs(self, batch: dict[str, jax.Array]) -> jax.Array:
    """What the model is applied to."""
    return batch[self.input_key]

  def example_input(self, input_shape: tuple[int, ...]) -> jax.Array:
    """One example of zeros, for the model's initialization."""
    return jnp.zeros((1, *input_shape), self.input_dtype)

  def example_batch(self, input_shape: tuple[int, ...],
                    leading: tuple[int, ...]) -> dict[str, np.ndarray]:
    """A batch of zeros shaped as the input pipeline gives it, with `leading` example axes
    (a benchmark's input: no data needed)."""
    raise NotImplementedError

  def loss(self, outputs: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    """The training loss of a batch (a scalar: its mean)."""
    raise NotImplementedError

  def train_metrics(self, outputs: jax.Array, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Every metric of `metrics` but the loss, over the batch (scalars: means), logged
    each step with the training loss."""
    return {}

  def eval_sums(self, outputs: jax.Array, batch: dict[str, jax.Array],
                mask: jax.Array) -> dict[str, jax.Array]:
    """Sums over a batch's real examples (`mask`) of each metric, and "count": how many
    units the sums are over (examples, or tokens). A split's metric is the sum of its
    batches' sums over the sum of their counts."""
    raise NotImplementedError


TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
  """Makes `task` known by its name (a data set's `task`, a config's `data.task`)."""
  if not task.name:
    raise ValueError(f"{type(task).__name__} has no name")
  if task.target.name not in task.metrics:
    raise ValueError(f"task {task.name!r}: its target reads {task.target.name!r}, which is not "
                     f"one of its metrics {task.metrics}")
  TASKS[task.name] = task
  return task
