"""Simulated cluster: what each tick's schedule is."""

from odsgd_jax.cluster._schedule import Schedule as Schedule
from odsgd_jax.cluster._schedule import abstract_schedule as abstract_schedule
from odsgd_jax.cluster._schedule import synchronous_schedule as synchronous_schedule
