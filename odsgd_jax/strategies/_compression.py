"""Fewer bits per round: compressors that do their own exchange, with error feedback.

A compressor averages a pytree over the worker axis the way it would travel on a
network. `exchange(tree, state, key, axis_name)` returns the mean of every
worker's decompressed message, this worker's own decompressed message (for
error feedback), the new state and the bits this worker sent. Where it is cheap
the exchange is honest: qsgd and sign all-gather integer codes plus one scale
per tensor, topk all-gathers indices and values, randomk all-reduces only the k
values at indices every worker draws from the same key. cast all-reduces the
dense tensor in the low precision; powersgd all-reduces its two low-rank factors.
XLA has no sub-byte types, so sign's bits travel as int8 here; the bit count is
that of the packed form (1 bit per element), which is what the simulator charges.

References:
  Ouyang, Dong, Xu, Xiao, Communication optimization strategies for distributed
  DNN training: a survey, arXiv:2003.03009; Alistarh et al., QSGD,
  arXiv:1610.02132; Karimireddy et al., EF-SignSGD, arXiv:1901.09847; Stich et
  al., Sparsified SGD with memory, arXiv:1809.07599; Vogels et al., PowerSGD,
  arXiv:1905.13727.
"""

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from odsgd_jax.strategies import _collectives as coll


class Compressor(NamedTuple):
  """init(params) -> state; exchange(tree, state, key, axis_name) -> (mean, own, state, bits).

  `collective` is how the messages travel ("allreduce" or "allgather"), so that the
  simulator charges the right pattern.
  """

  init: Callable[[Any], Any]
  exchange: Callable[..., tuple[Any, Any, Any, jax.Array]]
  name: str
  collective: str = "allreduce"
  unbiased: bool = False  # error feedback is for biased compressors; off by default here


def _bits(value) -> jax.Array:
  return jnp.asarray(value, jnp.float32)


def _no_state(params):
  del params
  return ()


def _per_leaf(leaf_exchange, name, collective="allreduce", unbiased=False):
  """A compressor that treats every tensor on its own, with no state."""

  def exchange(tree, state, key, axis_name):
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, max(len(leaves), 1))
    results = [leaf_exchange(x, k, axis_name) for x, k in zip(leaves, keys, strict=False)]
    mean = treedef.unflatten([r[0] for r in results])
    own = treedef.unflatten([r[1] for r in results])
    bits = sum((r[2] for r in results), _bits(0))
    return mean, own, state, bits

  return Compressor(_no_state, exchange, name, collective, unbiased)


def none() -> Compressor:
  """No compression: a float32 all-reduce."""

  def leaf(x, key, axis_name):
    del key
    return jax.lax.pmean(x, axis_name), x, _bits(x.size * 8 * x.dtype.itemsize)

  return _per_leaf(leaf, "none")


def cast(dtype: str = "bfloat16") -> Compressor:
  """Send in a lower precision (bf16/fp16): the all-reduce itself runs in it."""
  dtype = jnp.dtype(dtype)

  def leaf(x, key, axis_name):
    del key
    low = x.astype(dtype)
    return (jax.lax.pmean(low, axis_name).astype(x.dtype), low.astype(x.dtype),
            _bits(x.size * 8 * dtype.itemsize))

  return _per_leaf(leaf, f"cast({dtype.name})")


def topk(ratio: float) -> Compressor:
  """Keep the k = ceil(ratio n) largest-magnitude entries; send indices and values.

  Indices travel as uint16 where the tensor has at most 2**16 entries (int32 above).
  """
  if not 0 < ratio <= 1:
    raise ValueError(f"topk ratio must be in (0, 1], got {ratio}")

  def leaf(x, key, axis_name):
    del key
    flat = x.reshape(-1)
    k = max(1, math.ceil(ratio * flat.size))
    _, index = jax.lax.top_k(jnp.abs(flat), k)
    values = flat[index]
    own = jnp.zeros_like(flat).at[index].set(values)
    wire_index = index.astype(jnp.uint16 if flat.size <= 2**16 else jnp.int32)
    all_index = coll.all_gather(wire_index, axis_name).astype(jnp.int32)
    all_values = coll.all_gather(values, axis_name)
    summed = jnp.zeros_like(flat).at[all_index.reshape(-1)].add(all_values.reshape(-1))
    mean = summed / all_index.shape[0]
    index_bits = 8 * wire_index.dtype.itemsize
    return (mean.reshape(x.shape), own.reshape(x.shape),
            _bits(k * (index_bits + 8 * x.dtype.itemsize)))

  return _per_leaf(leaf, f"topk({ratio})", "allgather")


def randomk(ratio: float, rescale: bool = False) -> Compressor:
  """k = ceil(ratio n) random entries; every worker draws the same indices from the
  shared key, so only the k values travel. `rescale=True` multiplies them by n/k
  (unbiased, high variance); the default keeps them as they are and relies on error
  feedback (sparsified SGD with memory, Stich et al.)."""
  if not 0 < ratio <= 1:
    raise ValueError(f"randomk ratio must be in (0, 1], got {ratio}")

  def leaf(x, key, axis_name):
    flat = x.reshape(-1)
    k = max(1, math.ceil(ratio * flat.size))
    index = jax.random.choice(key, flat.size, (k,), replace=False)
    values = flat[index] * (flat.size / k if rescale else 1.0)
    own = jnp.zeros_like(flat).at[index].set(values)
    mean = jnp.zeros_like(flat).at[index].set(jax.lax.pmean(values, axis_name))
    return mean.reshape(x.shape), own.reshape(x.shape), _bits(k * 8 * x.dtype.itemsize)

  return _per_leaf(leaf, f"randomk({ratio})", unbiased=rescale)


def qsgd(levels: int = 4, bucket: int = 512) -> Compressor:
  """QSGD: in buckets of `bucket` entries, |x_j| / ||bucket|| stochastically rounded to
  one of `levels` levels (unbiased); sends int8 codes sign * level and one norm per
  bucket. Bucketing bounds the variance (Alistarh et al. use 512)."""
  if not 1 <= levels <= 127:
    raise ValueError(f"qsgd levels must be in [1, 127], got {levels}")
  code_bits = math.ceil(math.log2(2 * levels + 1))

  def leaf(x, key, axis_name):
    key = jax.random.fold_in(key, coll.worker_index(axis_name))  # independent rounding
    flat = x.reshape(-1).astype(jnp.float32)
    buckets = -(-flat.size // bucket)
    padded = jnp.pad(flat, (0, buckets * bucket - flat.size)).reshape(buckets, bucket)
    norms = jnp.linalg.norm(padded, axis=1, keepdims=True)
    scaled = jnp.abs(padded) / jnp.maximum(norms, 1e-30) * levels
    lower = jnp.floor(scaled)
    level = lower + (jax.random.uniform(key, padded.shape) < scaled - lower)
    codes = (jnp.sign(padded) * level).astype(jnp.int8)

    def decode(c, n):
      return (c.astype(jnp.float32) * n / levels).reshape(-1)[:flat.size].reshape(x.shape)

    all_codes = coll.all_gather(codes, axis_name)
    all_norms = coll.all_gather(norms, axis_name)
    decoded = jax.vmap(decode)(all_codes, all_norms)
    return (decoded.mean(0).astype(x.dtype), decode(codes, norms).astype(x.dtype),
            _bits(flat.size * code_bits + 32 * buckets))

  return _per_leaf(leaf, f"qsgd({levels})", "allgather", unbiased=True)


def sign() -> Compressor:
  """Scaled sign (EF-signSGD): sign(x) * mean|x|; sends the signs and one scale."""

  def leaf(x, key, axis_name):
    del key
    scale = jnp.mean(jnp.abs(x.astype(jnp.float32)))
    signs = jnp.where(x >= 0, 1, -1).astype(jnp.int8)
    decode = lambda s, c: (s.astype(jnp.float32) * c).astype(x.dtype)
    all_signs = coll.all_gather(signs, axis_name)
    all_scales = coll.all_gather(scale, axis_name)
    decoded = jax.vmap(decode)(all_signs, all_scales)
    return decoded.mean(0), decode(signs, scale), _bits(x.size + 32)

  return _per_leaf(leaf, "sign", "allgather")


def powersgd(rank: int = 2) -> Compressor:
  """PowerSGD: one power iteration per round on each matrix-shaped tensor, warm-started
  from the last round's Q; vectors (biases) are all-reduced as they are.

    P = mean_i M_i Q ;  P = orthonormal(P) ;  Q = mean_i M_i^T P ;  M ~ P Q^T
  """
  if rank < 1:
    raise ValueError(f"powersgd rank must be >= 1, got {rank}")

  def as_matrix(x):
    return x.reshape(x.shape[0], -1) if x.ndim > 1 else None

  def init(params):
    def leaf_state(x):
      matrix = as_matrix(x)
      if matrix is None:
        return jnp.zeros((1,), x.dtype)  # vectors travel uncompressed; orbax needs size > 0
      columns = min(rank, *matrix.shape)
      key = jax.random.PRNGKey(matrix.shape[0] * 7919 + matrix.shape[1])  # same on every worker
      return jax.random.normal(key, (matrix.shape[1], columns), x.dtype)
    return jax.tree.map(leaf_state, params)

  def exchange(tree, state, key, axis_name):
    del key
    means, owns, qs, bits = [], [], [], _bits(0)
    leaves, treedef = jax.tree.flatten(tree)
    for x, q in zip(leaves, jax.tree.leaves(state), strict=True):
      matrix = as_matrix(x)
      if matrix is None:
        means.append(jax.lax.pmean(x, axis_name))
        owns.append(x)
        qs.append(q)
        bits = bits + x.size * 8 * x.dtype.itemsize
        continue
      p = jax.lax.pmean(matrix @ q, axis_name)
      p, _ = jnp.linalg.qr(p)
      q = jax.lax.pmean(matrix.T @ p, axis_name)
      approx = (p @ q.T).reshape(x.shape).astype(x.dtype)
      means.append(approx)
      owns.append(approx)  # the factors are averaged: the mean is all a worker can rebuild
      qs.append(q)
      bits = bits + (p.size + q.size) * 8 * x.dtype.itemsize
    return (treedef.unflatten(means), treedef.unflatten(owns),
            jax.tree.unflatten(jax.tree.structure(state), qs), bits)

  return Compressor(init, exchange, f"powersgd({rank})")


class CommunicationState(NamedTuple):
  """Per-worker state of a compressed exchange."""

  error: Any  # this worker's error-feedback residual (zeros without error feedback)
  compressor_state: Any  # e.g. PowerSGD's Q, identical on every worker
  count: jax.Array  # shape=(), int32: exchanges so far (for the warm-up)
  bits: jax.Array  # shape=(), float32: bits this worker sent in the last exchange
  velocity: Any = None  # momentum correction's local velocity u_i (None without it)


def init_communication(compressor: Compressor, params: Any,
                       momentum: float = 0.0) -> CommunicationState:
  velocity = jax.tree.map(jnp.zeros_like, params) if momentum else None
  return CommunicationState(error=jax.tree.map(jnp.zeros_like, params),
                            compressor_state=compressor.init(params),
                            count=jnp.zeros((), jnp.int32), bits=jnp.zeros((), jnp.float32),
                            velocity=velocity)


def compressed_mean(tree: Any, state: CommunicationState, compressor: Compressor, axis_name,
                    *, error_feedback: bool = True, warmup_steps: int = 0,
                    momentum: float = 0.0, key: jax.Array | None = None,
                    sending: jax.Array | None = None) -> tuple[Any, Any, CommunicationState]:
  """The mean over workers of `tree` as it arrives through `compressor`, this worker's
  own decompressed message, and the new state.

  With error feedback each worker sends C(x_i + e_i) and keeps e_i <- x_i + e_i - c_i,
  so everything it ever wanted to send is sent eventually: sum of sent + residual ==
  sum of inputs. The first `warmup_steps` exchanges are uncompressed. A worker with
  `sending` False contributes zeros and keeps its residual.

  `momentum` > 0 is Deep Gradient Compression's momentum correction (Lin et al.,
  ICLR 2018): heavy-ball momentum moves in front of the compressor, so the
  residual accumulates velocities rather than gradients, and the receiver must
  apply plain SGD to the mean:

    u_i = momentum u_i + x_i ;  send C(u_i + e_i) ;  u_i = 0 where something was sent

  (the masking keeps a sent coordinate's momentum from being applied twice). During
  the dense warm-up every u_i goes out whole and is kept: plain momentum SGD.
  """
  key = jax.random.PRNGKey(0) if key is None else key
  key = jax.random.fold_in(key, state.count)  # the same on every worker: randomk's indices
  sending = jnp.ones((), bool) if sending is None else sending
  velocity = state.velocity
  if momentum:
    velocity = jax.tree.map(lambda u, x: momentum * u + x, state.velocity, tree)
    tree = velocity
  def compressed(_):
    corrected = jax.tree.map(jnp.add, tree, state.error) if error_feedback else tree
    corrected = jax.tree.map(lambda x: jnp.where(sending, x, jnp.zeros_like(x)), corrected)
    mean, own, compressor_state, bits = compressor.exchange(corrected, state.compressor_state,
                                                            key, axis_name)
    error = state.error
    if error_feedback:
      error = jax.tree.map(lambda c, o, e: jnp.where(sending, c - o, e), corrected, own, error)
    new_velocity = velocity
    if momentum:
      new_velocity = jax.tree.map(
          lambda u, o, old: jnp.where(sending, jnp.where(o != 0, jnp.zeros_like(u), u), old),
          velocity, own, state.velocity)
    return mean, own, error, compressor_state, bits, new_velocity

  def dense(_):
    plain = jax.tree.map(lambda x: jnp.where(sending, x, jnp.zeros_like(x)), tree)
    mean, _, _, bits = none().exchange(plain, (), key, axis_name)
    kept = velocity
    if momentum:
      kept = jax.tree.map(lambda u, old: jnp.where(sending, u, old), velocity, state.velocity)
    return mean, plain, state.error, state.compressor_state, bits, kept

  if warmup_steps:  # a real branch: warm-up steps run only the dense exchange
    warm = coll.uniform(state.count < warmup_steps, axis_name)
    mean, own, error, compressor_state, bits, new_velocity = jax.lax.cond(
        warm, dense, compressed, None)
  else:
    mean, own, error, compressor_state, bits, new_velocity = compressed(None)
  bits = jnp.where(sending, bits, 0.0)
  return mean, own, CommunicationState(error, compressor_state, state.count + 1, bits,
                                       new_velocity)


class Communication(NamedTuple):
  """How a strategy's all-reduce travels: a compressor, error feedback, a warm-up,
  and optionally momentum correction.

  `error_feedback=None` picks the compressor's default: on for the biased ones
  (topk, sign, powersgd, cast), off for the unbiased ones (qsgd, randomk), whose
  variance error feedback would feed back.
  """

  compressor: Compressor
  error_feedback: bool | None = None
  warmup_steps: int = 0
  momentum: float = 0.0  # > 0: DGC momentum correction (the inner optimizer: plain SGD)

  @property
  def uses_error_feedback(self) -> bool:
    if self.error_feedback is None:
      return not self.compressor.unbiased
    return self.error_feedback

  def init(self, params: Any) -> CommunicationState:
    return init_communication(self.compressor, params, self.momentum)

  def mean(self, tree: Any, state: CommunicationState, axis_name,
           sending: jax.Array | None = None) -> tuple[Any, CommunicationState]:
    """The workers' mean of `tree` after compression."""
    mean, _, state = self.exchange(tree, state, axis_name, sending)
    return mean, state

  def exchange(self, tree, state, axis_name, sending=None):
    """(mean, this worker's decompressed message, new state)."""
    return compressed_mean(tree, state, self.compressor, axis_name,
                           error_feedback=self.uses_error_feedback,
                           warmup_steps=self.warmup_steps, momentum=self.momentum,
                           sending=sending)


def all_reduce_mean(communication: "Communication | None", tree: Any, state: Any, axis_name,
                    sending: jax.Array | None = None) -> tuple[Any, Any]:
  """The one mechanism every strategy's averaging goes through: a plain pmean
  without compression, the compressed exchange with it. Returns (mean, state)."""
  if communication is None:
    if sending is not None:
      tree = jax.tree.map(lambda x: jnp.where(sending, x, jnp.zeros_like(x)), tree)
    return jax.lax.pmean(tree, axis_name), state
  return communication.mean(tree, state, axis_name, sending)


def init_state(communication: "Communication | None", params: Any):
  return None if communication is None else communication.init(params)


def _is_fraction(text: str) -> bool:
  try:
    return 0.0 <= float(text) < 1.0
  except ValueError:
    return False


def parse_communication(spec: "str | Communication | None") -> "Communication | None":
  """None/"" -> None; "topk:0.01" or "topk:0.01,error_feedback=false,warmup=100"."""
  if spec is None or isinstance(spec, Communication):
    return spec
  if not spec or spec == "none":
    return None
  compressor_spec, *settings = [part.strip() for part in spec.split(",")]
  options = {}
  for setting in settings:
    key, _, value = setting.partition("=")
    if key == "error_feedback" and value.lower() in ("true", "false"):
      options["error_feedback"] = value.lower() == "true"
    elif key == "warmup" and value.isdigit():
      options["warmup_steps"] = int(value)
    elif key == "momentum" and _is_fraction(value):
      options["momentum"] = float(value)
    else:
      raise ValueError(f"compression {spec!r}: unknown setting {setting!r} (allowed: "
                       f"error_feedback=true|false, warmup=<steps>, momentum=<0..1>)")
  return Communication(parse_compressor(compressor_spec), **options)


COMPRESSORS: dict[str, Callable[..., Compressor]] = {
    "none": none, "cast": cast, "topk": topk, "randomk": randomk, "qsgd": qsgd, "sign": sign,
    "powersgd": powersgd,
}


def parse_compressor(spec: str) -> Compressor:
  """"topk:0.01", "qsgd:4", "powersgd:2", "cast:bfloat16", "sign", "randomk:0.1", "none"."""
  name, _, argument = spec.partition(":")
  if name not in COMPRESSORS:
    raise ValueError(f"compression {spec!r}: unknown compressor {name!r}; choose one of "
                     f"{sorted(COMPRESSORS)}")
  if not argument:
    return COMPRESSORS[name]()
  if name == "cast":
    return cast(argument)
  number = float(argument)
  return COMPRESSORS[name](int(number) if name in ("qsgd", "powersgd") else number)
