"""Device mesh with a worker axis, and the shard_map + vmap per-worker runner."""

from odsgd_jax.parallel._mesh import BATCH as BATCH
from odsgd_jax.parallel._mesh import INTRA as INTRA
from odsgd_jax.parallel._mesh import LOCAL as LOCAL
from odsgd_jax.parallel._mesh import PER_WORKER as PER_WORKER
from odsgd_jax.parallel._mesh import REPLICATED as REPLICATED
from odsgd_jax.parallel._mesh import WORKER_AXES as WORKER_AXES
from odsgd_jax.parallel._mesh import WORKERS as WORKERS
from odsgd_jax.parallel._mesh import WorkerMesh as WorkerMesh
from odsgd_jax.parallel._mesh import make_worker_mesh as make_worker_mesh
