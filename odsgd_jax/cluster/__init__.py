"""Simulated cluster: worker speeds, network costs, and per-strategy timelines that
produce each tick's schedule and its simulated duration."""

from odsgd_jax.cluster._hardware import TOPOLOGIES as TOPOLOGIES
from odsgd_jax.cluster._hardware import Network as Network
from odsgd_jax.cluster._hardware import Workers as Workers
from odsgd_jax.cluster._schedule import Schedule as Schedule
from odsgd_jax.cluster._schedule import synchronous_schedule as synchronous_schedule
from odsgd_jax.cluster._timelines import TickCost as TickCost
from odsgd_jax.cluster._timelines import Timeline as Timeline
from odsgd_jax.cluster._timelines import make_timeline as make_timeline
