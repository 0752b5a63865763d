"""Train state, pure train step, loop, evaluation, metrics and checkpoints."""

from odsgd_jax.train._checkpoint import CheckpointError as CheckpointError
from odsgd_jax.train._checkpoint import Checkpoints as Checkpoints
from odsgd_jax.train._checkpoint import hide_abandoned_save_noise as hide_abandoned_save_noise
from odsgd_jax.train._compile_cache import use_compilation_cache as use_compilation_cache
from odsgd_jax.train._evaluate import Evaluator as Evaluator
from odsgd_jax.train._experiment import Experiment as Experiment
from odsgd_jax.train._experiment import build_experiment as build_experiment
from odsgd_jax.train._loop import BatchSource as BatchSource
from odsgd_jax.train._loop import Hook as Hook
from odsgd_jax.train._loop import NonFiniteLossError as NonFiniteLossError
from odsgd_jax.train._loop import Preempted as Preempted
from odsgd_jax.train._loop import train_and_evaluate as train_and_evaluate
from odsgd_jax.train._metrics import read_metrics as read_metrics
from odsgd_jax.train._optimizer import make_inner_optimizer as make_inner_optimizer
from odsgd_jax.train._optimizer import make_lr_schedule as make_lr_schedule
from odsgd_jax.train._optimizer import strategy_spec as strategy_spec
from odsgd_jax.train._step import TrainState as TrainState
from odsgd_jax.train._step import init_state as init_state
from odsgd_jax.train._step import make_eval_step as make_eval_step
from odsgd_jax.train._step import TrainStep as TrainStep
from odsgd_jax.train._step import make_train_step as make_train_step
from odsgd_jax.train._step import model_variables as model_variables
from odsgd_jax.train._validate import ConfigError as ConfigError
from odsgd_jax.train._validate import validate_config as validate_config
from odsgd_jax.train._workdir import WorkdirError as WorkdirError
