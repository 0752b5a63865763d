"""How workers talk: collectives over a (tuple of) worker axes, compressors, and the
exchanges every strategy's messages go through (`exchange`: means and gathers, compressed
or not; `neighbour_mean`: gossip on a fixed graph), each recording what a worker sent, and
`hold`: a message kept for the next tick."""

from odsgd_jax.comm._collectives import AxisName as AxisName
from odsgd_jax.comm._collectives import all_gather as all_gather
from odsgd_jax.comm._collectives import first_worker as first_worker
from odsgd_jax.comm._collectives import from_worker_ahead as from_worker_ahead
from odsgd_jax.comm._collectives import mean as mean
from odsgd_jax.comm._collectives import num_workers as num_workers
from odsgd_jax.comm._collectives import total as total
from odsgd_jax.comm._collectives import uniform as uniform
from odsgd_jax.comm._collectives import worker_index as worker_index
from odsgd_jax.comm._compressors import COMPRESSORS as COMPRESSORS
from odsgd_jax.comm._compressors import Compressor as Compressor
from odsgd_jax.comm._compressors import parse_compressor as parse_compressor
from odsgd_jax.comm._exchange import COMPRESSION as COMPRESSION
from odsgd_jax.comm._exchange import MESSAGE_SCOPE as MESSAGE_SCOPE
from odsgd_jax.comm._exchange import Communication as Communication
from odsgd_jax.comm._exchange import CommunicationState as CommunicationState
from odsgd_jax.comm._exchange import compressed_exchange as compressed_exchange
from odsgd_jax.comm._exchange import exchange as exchange
from odsgd_jax.comm._exchange import Traffic as Traffic
from odsgd_jax.comm._exchange import init_state as init_state
from odsgd_jax.comm._exchange import init_traffic as init_traffic
from odsgd_jax.comm._exchange import neighbour_mean as neighbour_mean
from odsgd_jax.comm._exchange import parse_communication as parse_communication
from odsgd_jax.comm._held import SMALL_TENSOR_BYTES as SMALL_TENSOR_BYTES
from odsgd_jax.comm._held import Held as Held
from odsgd_jax.comm._held import as_trees as as_trees
from odsgd_jax.comm._held import held_like as held_like
from odsgd_jax.comm._held import hold as hold
