"""The one way a strategy's messages travel: `exchange`, with compression, error feedback,
a dense warm-up and momentum correction, recording what each worker sent and how."""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from odsgd_jax import domains
from odsgd_jax.comm import _collectives as coll
from odsgd_jax.comm._compressors import Compressor, none, parse_compressor
from odsgd_jax.comm._held import Held, held_mean

# The name scope of every message's collectives (`exchange`, `neighbour_mean`): what a
# traced update sends is read off its program by it (odsgd_jax/strategies/_tracing.py),
# as the clock's bookkeeping collectives (`total`, `mean`) carry none. A name scope is
# metadata only: the compiled program is the same.
MESSAGE_SCOPE = "message"


def _message(function):
  """`function`'s collectives under `MESSAGE_SCOPE`."""

  @functools.wraps(function)
  def scoped(*args, **kwargs):
    with jax.named_scope(MESSAGE_SCOPE):
      return function(*args, **kwargs)

  return scoped


class CommunicationState(NamedTuple):
  """Per-worker state of a compressed exchange."""

  error: Any  # this worker's error-feedback residual (zeros without error feedback)
  compressor_state: Any  # e.g. PowerSGD's Q, identical on every worker
  count: jax.Array  # shape=(), int32: exchanges so far (for the warm-up)
  bits: jax.Array  # shape=(), float32: bits this worker sent in the last exchange
  velocity: Any = None  # momentum correction's local velocity u_i (None without it)
  gathered: Any = None  # shape=(), bool: the last exchange travelled as an all-gather


class Communication(NamedTuple):
  """How a strategy's averaging travels: a compressor, error feedback, a warm-up, and
  optionally momentum correction.

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
    velocity = jax.tree.map(jnp.zeros_like, params) if self.momentum else None
    return CommunicationState(error=jax.tree.map(jnp.zeros_like, params),
                              compressor_state=self.compressor.init(params),
                              count=jnp.zeros((), jnp.int32), bits=jnp.zeros((), jnp.float32),
                              velocity=velocity, gathered=jnp.zeros((), bool))


def init_state(communication: Communication | None, params: Any) -> CommunicationState | None:
  """The exchange's per-worker state (None without compression)."""
  return None if communication is None else communication.init(params)


def _masked(tree: Any, sending: jax.Array) -> Any:
  """What a worker that is not `sending` contributes: zeros."""
  return jax.tree.map(lambda x: jnp.where(sending, x, jnp.zeros_like(x)), tree)


def _compressed(communication: Communication, tree: Any, velocity: Any,
                state: CommunicationState, key: jax.Array, axis_name, sending: jax.Array):
  """A compressed exchange: (mean, own message, error, compressor state, bits, velocity)."""
  feedback = communication.uses_error_feedback
  corrected = jax.tree.map(jnp.add, tree, state.error) if feedback else tree
  corrected = _masked(corrected, sending)
  mean, own, compressor_state, bits = communication.compressor.exchange(
      corrected, state.compressor_state, key, axis_name)
  error = state.error
  if feedback:
    error = jax.tree.map(lambda c, o, e: jnp.where(sending, c - o, e), corrected, own, error)
  if communication.momentum:  # a coordinate's velocity, once sent, is not applied twice
    velocity = jax.tree.map(
        lambda u, o, old: jnp.where(sending, jnp.where(o != 0, jnp.zeros_like(u), u), old),
        velocity, own, state.velocity)
  return mean, own, error, compressor_state, bits, velocity


def _dense(communication: Communication, tree: Any, velocity: Any, state: CommunicationState,
           key: jax.Array, axis_name, sending: jax.Array):
  """A warm-up exchange: the plain mean, every velocity sent whole and kept."""
  plain = _masked(tree, sending)
  mean, _, _, bits = none().exchange(plain, (), key, axis_name)
  if communication.momentum:
    velocity = jax.tree.map(lambda u, old: jnp.where(sending, u, old), velocity, state.velocity)
  return mean, plain, state.error, state.compressor_state, bits, velocity


def compressed_exchange(communication: Communication, tree: Any, state: CommunicationState,
                        axis_name, sending: jax.Array | None = None, key: jax.Array | None = None,
                        ) -> tuple[Any, Any, CommunicationState]:
  """The mean over workers of `tree` as it arrives through the compressor, this worker's
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
  if communication.momentum:
    velocity = jax.tree.map(lambda u, x: communication.momentum * u + x, state.velocity, tree)
    tree = velocity
  arguments = (communication, tree, velocity, state, key, axis_name, sending)
  gathered = jnp.asarray(communication.compressor.collective == "allgather")
  if communication.warmup_steps:  # a real branch: warm-up steps run only the dense exchange
    warm = coll.uniform(state.count < communication.warmup_steps, axis_name)
    outputs = jax.lax.cond(warm, lambda _: _dense(*arguments),
                           lambda _: _compressed(*arguments), None)
    gathered = gathered & ~warm
  else:
    outputs = _compressed(*arguments)
  mean, own, error, compressor_state, bits, new_velocity = outputs
  bits = jnp.where(sending, bits, 0.0)
  return mean, own, CommunicationState(error, compressor_state, state.count + 1, bits,
                                       new_velocity, gathered)


def _dense_bits(tree: Any) -> jax.Array:
  return jnp.asarray(sum(x.size * x.dtype.itemsize * 8 for x in jax.tree.leaves(tree)),
                     jnp.float32)


@_message
def exchange(communication: Communication | None, tree: Any, state: CommunicationState | None,
             axis_name, *, sending: jax.Array | None = None, gather: bool = False,
             exact: bool = False) -> tuple[Any, CommunicationState | None]:
  """The one way every strategy's messages travel between workers.

  Args:
    communication: the compression (None: plain float32 collectives).
    tree: this worker's message (gradients, model deltas), or a message held for a tick
      (`hold`: its small tensors travel as one operand of the all-reduce).
    state: the exchange's state (`init_state`); None without compression.
    axis_name: the worker axis (or tuple of axes).
    sending: whether this worker sends (False: it contributes zeros, keeps its residual).
    gather: False: the mean over workers of the messages as they arrive; True: every
      worker's message as it arrives, stacked on a new leading axis of size N (what a
      parameter server receives, one by one).

    exact: the message travels uncompressed even when `communication` compresses (an
      optimizer's state: a compressor's error would corrupt it). Sent on a tick whose
      compressed exchange came first, its bits are added to that tick's record.

  Returns:
    (mean or stacked messages, new state). The state records the bits this worker
    sent and whether they travelled as an all-gather: the simulated clock charges them.
  """
  if isinstance(tree, Held):  # a message held for a tick (`hold`): its plain mean
    if communication is not None or gather or exact:
      raise TypeError("a held message (comm.hold) travels as a plain mean only: hold it "
                      "with the exchange's communication, which keeps a compressed one a tree")
    if sending is not None:
      tree = _masked(tree, sending)
    return held_mean(tree, axis_name), state
  if communication is None or exact:
    if sending is not None:
      tree = _masked(tree, sending)
    result = coll.all_gather(tree, axis_name) if gather else jax.lax.pmean(tree, axis_name)
    if state is not None:  # an exact message beside a compressed exchange
      sent = _dense_bits(tree) if sending is None else jnp.where(sending, _dense_bits(tree), 0.0)
      state = state._replace(bits=state.bits + sent)
    return result, state
  mean, own, state = compressed_exchange(communication, tree, state, axis_name, sending)
  return (coll.all_gather(own, axis_name) if gather else mean), state


class Traffic(NamedTuple):
  """What a worker sent in its last uncompressed neighbour exchange (`neighbour_mean`): the
  same fields the clock reads from a `CommunicationState`."""

  count: jax.Array  # shape=(), int32: exchanges so far
  bits: jax.Array  # shape=(), float32: bits this worker sent in the last exchange
  gathered: jax.Array  # shape=(), bool: always False (messages to single peers)


def init_traffic() -> Traffic:
  return Traffic(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32), jnp.zeros((), bool))


@_message
def neighbour_mean(tree: Any, traffic: Traffic, axis_name,
                   offsets: tuple[int, ...]) -> tuple[Any, Traffic]:
  """The mean of this worker's `tree` and its peers' (worker i receives from workers
  i + k mod N, k in `offsets`), as gossip averaging on a fixed graph does; `traffic`
  records the bits this worker sent: one copy of `tree` to each peer (a circulant graph:
  as many peers send to it as it receives from).

  Each copy travels by `jax.lax.ppermute` (`from_worker_ahead`): what the clock charges
  is what moves, and no worker receives every model.
  """
  if not offsets:
    return tree, traffic._replace(count=traffic.count + 1, bits=jnp.zeros((), jnp.float32))
  total = jax.tree.map(lambda x: x.astype(jnp.float32), tree)
  for k in offsets:
    peer = coll.from_worker_ahead(tree, k, axis_name)
    total = jax.tree.map(lambda t, p: t + p.astype(jnp.float32), total, peer)
  mean = jax.tree.map(lambda t, own: (t / (1 + len(offsets))).astype(own.dtype), total, tree)
  return mean, Traffic(traffic.count + 1, len(offsets) * _dense_bits(tree), traffic.gathered)


# The settings after the compressor, as "key=value", and the Communication field each sets.
SETTINGS: dict[str, tuple[str, domains.Domain]] = {
    "error_feedback": ("error_feedback", domains.FLAG),
    "warmup": ("warmup_steps", domains.integer(0)),
    "momentum": ("momentum", domains.FRACTION),
}


def _setting_value(text: str, domain: domains.Domain) -> Any:
  if domain.kind == "bool":
    return {"true": True, "false": False}.get(text.lower(), text)
  try:
    number = float(text)
  except ValueError:
    return text
  return int(number) if domain.kind == "int" and number.is_integer() else number


@functools.lru_cache(maxsize=None)
def _parse(spec: str) -> Communication | None:
  if not spec or spec == "none":
    return None
  compressor_spec, *settings = [part.strip() for part in spec.split(",")]
  options = {}
  for setting in settings:
    key, _, text = setting.partition("=")
    if key not in SETTINGS:
      raise ValueError(f"compression {spec!r}: unknown setting {setting!r} (allowed: "
                       f"{', '.join(f'{k}=<{d.describe()}>' for k, (_, d) in SETTINGS.items())})")
    field, domain = SETTINGS[key]
    value = _setting_value(text, domain)
    domains.check_value(f"compression {spec!r}: {key}", value, domain)
    options[field] = value
  return Communication(parse_compressor(compressor_spec), **options)


def _spec_problem(spec: Any) -> str | None:
  if not isinstance(spec, (str, Communication)):
    return "is not a compression spec"
  try:
    parse_communication(spec)
  except ValueError as error:
    return f"is not a compression spec ({error})"
  return None


COMPRESSION = domains.Domain(
    "other", optional=True, check=_spec_problem,
    text="a spec such as 'topk:0.01', 'qsgd:8,warmup=100' or 'none'")


def parse_communication(spec: "str | Communication | None") -> Communication | None:
  """None/"" -> None; "topk:0.01" or "topk:0.01,error_feedback=false,warmup=100"
  (each spec is parsed once per process)."""
  if spec is None or isinstance(spec, Communication):
    return spec
  return _parse(spec)
