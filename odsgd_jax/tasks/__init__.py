"""What a model is trained to do: its batch, its loss, its metrics, and which metric a
study's targets read in which direction (docs/running.md, "Bring your own model and
task")."""

from odsgd_jax.tasks._classification import Classification as Classification
from odsgd_jax.tasks._next_token import NextToken as NextToken
from odsgd_jax.tasks._task import TASKS as TASKS
from odsgd_jax.tasks._task import Metric as Metric
from odsgd_jax.tasks._task import Task as Task
from odsgd_jax.tasks._task import register_task as register_task

CLASSIFICATION = register_task(Classification())
NEXT_TOKEN = register_task(NextToken())
