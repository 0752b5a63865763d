"""Device mesh with a worker axis, the shard_map + vmap per-worker runner, and
running it from several processes (jax.distributed)."""

from odsgd_jax.parallel._mesh import BATCH as BATCH
from odsgd_jax.parallel._mesh import INTRA as INTRA
from odsgd_jax.parallel._mesh import LOCAL as LOCAL
from odsgd_jax.parallel._mesh import PER_WORKER as PER_WORKER
from odsgd_jax.parallel._mesh import REPLICATED as REPLICATED
from odsgd_jax.parallel._mesh import WORKER_AXES as WORKER_AXES
from odsgd_jax.parallel._mesh import WORKERS as WORKERS
from odsgd_jax.parallel._mesh import WorkerMesh as WorkerMesh
from odsgd_jax.parallel._mesh import devices_in_use as devices_in_use
from odsgd_jax.parallel._mesh import make_worker_mesh as make_worker_mesh
from odsgd_jax.parallel._mesh import per_worker_update as per_worker_update
from odsgd_jax.parallel._multihost import detected_launcher as detected_launcher
from odsgd_jax.parallel._multihost import fetch as fetch
from odsgd_jax.parallel._multihost import initialize as initialize
from odsgd_jax.parallel._multihost import local_workers as local_workers
from odsgd_jax.parallel._multihost import put_batch as put_batch
from odsgd_jax.parallel._multihost import put_global as put_global
from odsgd_jax.parallel._peers import Activity as Activity
from odsgd_jax.parallel._peers import PeerLostError as PeerLostError
from odsgd_jax.parallel._peers import PeerWatch as PeerWatch
from odsgd_jax.parallel._peers import across_processes as across_processes
from odsgd_jax.parallel._peers import causes as causes
from odsgd_jax.parallel._peers import is_peer_failure as is_peer_failure
