"""Fewer bits per round: compressors, each doing its own exchange over the worker axis.

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

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from odsgd_jax import domains
from odsgd_jax.comm import _collectives as coll


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


# PowerSGD's projections in full float32: at the platform's default precision a GPU
# multiplies float32 matrices in TF32 (10-bit mantissa), and a full-rank PowerSGD would no
# longer be the plain mean (the model's own matmuls keep the fast default; docs/DESIGN.md).
_exact_matmul = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)


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
      p = jax.lax.pmean(_exact_matmul(matrix, q), axis_name)
      p, _ = jnp.linalg.qr(p)
      q = jax.lax.pmean(_exact_matmul(matrix.T, p), axis_name)
      approx = _exact_matmul(p, q.T).reshape(x.shape).astype(x.dtype)
      means.append(approx)
      owns.append(approx)  # the factors are averaged: the mean is all a worker can rebuild
      qs.append(q)
      bits = bits + (p.size + q.size) * 8 * x.dtype.itemsize
    return (treedef.unflatten(means), treedef.unflatten(owns),
            jax.tree.unflatten(jax.tree.structure(state), qs), bits)

  return Compressor(init, exchange, f"powersgd({rank})")


COMPRESSORS: dict[str, Callable[..., Compressor]] = {
    "none": none, "cast": cast, "topk": topk, "randomk": randomk, "qsgd": qsgd, "sign": sign,
    "powersgd": powersgd,
}


# The argument after ':' that each compressor takes (none and sign take none).
ARGUMENTS: dict[str, domains.Domain] = {
    "cast": domains.choice("bfloat16", "float16", "float32"),
    "topk": domains.real(0, 1, low_open=True),
    "randomk": domains.real(0, 1, low_open=True),
    "qsgd": domains.integer(1, 127),
    "powersgd": domains.integer(1),
}


def parse_compressor(spec: str) -> Compressor:
  """"topk:0.01", "qsgd:4", "powersgd:2", "cast:bfloat16", "sign", "randomk:0.1", "none"."""
  name, _, argument = spec.partition(":")
  if name not in COMPRESSORS:
    raise ValueError(f"compression {spec!r}: unknown compressor {name!r}; choose one of "
                     f"{sorted(COMPRESSORS)}")
  if not argument:
    return COMPRESSORS[name]()
  if name not in ARGUMENTS:
    raise ValueError(f"compression {spec!r}: {name} takes no argument")
  domain = ARGUMENTS[name]
  value = argument if domain.kind == "choice" else _number(argument)
  domains.check_value(f"compression {spec!r}: {name}", value, domain)
  return COMPRESSORS[name](int(value) if domain.kind == "int" else value)


def _number(text: str) -> "float | str":
  try:
    return float(text)
  except ValueError:
    return text  # the domain check names it
