"""Plain NumPy (float64, explicit loops) versions of every strategy.

Written from docs/DESIGN.md's formulas, independently of odsgd_jax: no JAX, no optax,
one worker at a time, one arriving gradient at a time. Each simulation runs T
ticks of N workers on a problem given by `grad(t, i, x) -> (gradient, loss)` and
returns the workers' parameters after every tick, shape (T, N, d), and the model.
"""

from typing import Callable, NamedTuple

import numpy as np


class SGD:
  """optax.sgd semantics: m <- g + mu m (if mu); u = -lr m; nesterov: u = -lr (g + mu m)."""

  def __init__(self, lr, momentum=0.0, nesterov=False):
    self.lr, self.momentum, self.nesterov = lr, momentum, nesterov

  def init(self, x):
    return np.zeros_like(x)

  def update(self, g, m):
    if not self.momentum:
      return -self.lr * g, m
    m = g + self.momentum * m
    direction = g + self.momentum * m if self.nesterov else m
    return -self.lr * direction, m

  def zero_gradient(self, m):
    return np.zeros_like(m)


class Adam:
  """optax.adam semantics (scale_by_adam, then -lr), per worker where a strategy keeps the
  inner state per worker: m <- b1 m + (1 - b1) g, v <- b2 v + (1 - b2) g^2, t <- t + 1,
  u = -lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). AdamW's decoupled decay is
  checked on its own (tests/test_optimizer.py)."""

  def __init__(self, lr, b1=0.9, b2=0.999, eps=1e-8):
    self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

  def init(self, x):
    return (np.zeros_like(x), np.zeros_like(x), 0)

  def update(self, g, state):
    m, v, t = state
    m = self.b1 * m + (1 - self.b1) * g
    v = self.b2 * v + (1 - self.b2) * g * g
    t += 1
    m_hat, v_hat = m / (1 - self.b1 ** t), v / (1 - self.b2 ** t)
    return -self.lr * m_hat / (np.sqrt(v_hat) + self.eps), (m, v, t)

  def zero_gradient(self, state):
    return np.zeros_like(state[0])


class Spike:
  """Spike compensation (Kosson et al. 2021) as the gradient fed to heavy ball:
  v = mu v + g ; v_hat = mu^D v + (1 - mu^D) / (1 - mu) g ; fed = v_hat - mu v_hat_prev."""

  def __init__(self, momentum, x0):
    self.mu, self.v, self.v_hat = momentum, np.zeros_like(x0), np.zeros_like(x0)

  def feed(self, g, delay, commit=True):
    a = self.mu ** delay
    b = (1 - a) / (1 - self.mu)
    v = self.mu * self.v + g
    v_hat = a * v + b * g
    fed = v_hat - self.mu * self.v_hat
    if commit:
      self.v, self.v_hat = v, v_hat
    return fed


def average_states(states):
  """Every worker's inner state replaced by the mean over the workers of its arrays (the
  moments); a counter (Adam's step count) stays each worker's own."""
  if not isinstance(states[0], tuple):
    mean = np.mean(states, axis=0)
    return [mean.copy() for _ in states]
  means = [np.mean([s[j] for s in states], axis=0) if isinstance(part, np.ndarray) else None
           for j, part in enumerate(states[0])]
  return [tuple(part if mean is None else mean.copy() for part, mean in zip(s, means, strict=True))
          for s in states]


def drift(inner, s, steps):
  """The sum of `steps` updates of a zero gradient (the optimizer's own motion)."""
  total = 0.0
  for _ in range(steps):
    u, s = inner.update(inner.zero_gradient(s), s)
    total = total + u
  return total


def ssgd(grad, x0, N, T, inner):
  x, s, history = x0.copy(), inner.init(x0), []
  for t in range(T):
    g = np.mean([grad(t, i, x)[0] for i in range(N)], axis=0)
    u, s = inner.update(g, s)
    x = x + u
    history.append([x.copy() for _ in range(N)])
  return np.array(history), x


def asgd(grad, x0, N, T, inner, schedules, delay_compensation=0.0, correction="none",
         inner_momentum=0.9):
  server, s = x0.copy(), inner.init(x0)
  xs, history = [x0.copy() for _ in range(N)], []
  version, pulled = 0, [0] * N
  spike = Spike(inner_momentum, x0) if "spike" in correction else None
  for t in range(T):
    grads = [grad(t, i, xs[i])[0] for i in range(N)]  # each at its own (stale) copy
    snapshots = [x.copy() for x in xs]
    active, order = schedules[t]
    for k in order:
      if not active[k]:
        continue
      g = grads[k] + delay_compensation * grads[k] * grads[k] * (server - snapshots[k])
      if spike is not None:
        g = spike.feed(g, version - pulled[k])
      u, s = inner.update(g, s)
      server = server + u
      version += 1
      pulled[k] = version
      xs[k] = server + drift(inner, s, N - 1) if "predict" in correction else server.copy()
    history.append([x.copy() for x in xs])
  return np.array(history), server


def ssp(grad, x0, N, T, inner, schedules, staleness):
  server, s = x0.copy(), inner.init(x0)
  xs, clocks, history = [x0.copy() for _ in range(N)], [0] * N, []
  for t in range(T):
    grads = [grad(t, i, xs[i])[0] for i in range(N)]
    active, _ = schedules[t]
    slowest = min(clocks)
    pushes = [bool(active[i]) and clocks[i] - slowest <= staleness for i in range(N)]
    if any(pushes):
      total = np.zeros_like(x0)
      for i in range(N):
        if pushes[i]:
          total = total + grads[i]
      u, s = inner.update(total / N, s)
      server = server + u
    for i in range(N):
      if pushes[i]:
        xs[i] = server.copy()
        clocks[i] += 1
    history.append([x.copy() for x in xs])
  return np.array(history), server


def odsgd(grad, x0, N, T, inner, local_lr, local_optimizer="sgd", warmup_steps=0,
          dc_lambda=2.0, local_momentum=0.9, local_weight_decay=0.0, correction="none",
          inner_momentum=0.9):
  W, s = x0.copy(), inner.init(x0)
  xs = [x0.copy() for _ in range(N)]
  pending = [np.zeros_like(x0) for _ in range(N)]
  momentum = [np.zeros_like(x0) for _ in range(N)]
  spike = Spike(inner_momentum, x0) if "spike" in correction else None
  history = []
  for t in range(T):
    grads = [grad(t, i, xs[i])[0] for i in range(N)]
    if t < warmup_steps:
      G = np.mean(grads, axis=0)
      if spike is not None:
        spike.feed(G, 0)  # on time: the velocity follows, nothing is compensated
      u, s = inner.update(G, s)
      W = W + u
      xs = [W.copy() for _ in range(N)]
    else:
      W_prev = W.copy()
      if t > warmup_steps:
        G = np.mean(pending, axis=0)
        u, s = inner.update(spike.feed(G, 1) if spike is not None else G, s)
        W = W + u
      base = W + drift(inner, s, 1) if "predict" in correction else W
      for i in range(N):
        g = grads[i]
        if local_optimizer == "replay":  # the next global update, were the mean g_i
          guess = spike.feed(g, 1, commit=False) if spike is not None else g
          xs[i] = W + inner.update(guess, s)[0]
        elif local_optimizer == "sgd":
          xs[i] = base - local_lr * (g + local_weight_decay * base)
        elif local_optimizer == "momentum":
          momentum[i] = local_momentum * momentum[i] + g + local_weight_decay * base
          xs[i] = base - local_lr * momentum[i]
        else:  # dcasgd
          dc = dc_lambda / np.sqrt(g * g + 1e-7) * g * g * (base - W_prev)
          xs[i] = base - local_lr * (local_weight_decay * base + g + dc)
      pending = [g.copy() for g in grads]
    history.append([x.copy() for x in xs])
  return np.array(history), W


def delayed_sgd(grad, x0, N, T, inner):
  """One-step-delayed SGD: x_{t+1} = x_t + inner(mean_i g_i(x_{t-1})), no update at t=0."""
  x, s, previous_grad, history = x0.copy(), inner.init(x0), None, []
  for t in range(T):
    g = np.mean([grad(t, i, x)[0] for i in range(N)], axis=0)
    if previous_grad is not None:
      u, s = inner.update(previous_grad, s)
      x = x + u
    previous_grad = g
    history.append([x.copy() for _ in range(N)])
  return np.array(history), x


def pseudo_sync(grad, x0, N, T, inner, confidence="adaptive", phi=0.9, alpha_min=0.1,
                alpha=0.5, correction="none", inner_momentum=0.9):
  W, s = x0.copy(), inner.init(x0)
  xs = [x0.copy() for _ in range(N)]
  pending = A = M = None
  prediction, a = np.zeros_like(x0), 1.0
  spike = Spike(inner_momentum, x0) if "spike" in correction else None
  history = []
  for t in range(T):
    grads = [grad(t, i, xs[i])[0] for i in range(N)]
    if t > 0:
      G = np.mean(pending, axis=0)
      previous = G if t == 1 else prediction
      e = G - previous
      A = (1 - phi) * e if A is None else phi * A + (1 - phi) * e
      M = (1 - phi) * np.abs(e) if M is None else phi * M + (1 - phi) * np.abs(e)
      if confidence == "adaptive":
        a = float(np.clip(abs(np.sum(A)) / (np.sum(M) + 1e-12), alpha_min, 1.0))
      else:
        a = alpha
      prediction = a * G + (1 - a) * previous
      u, s = inner.update(spike.feed(prediction, 1) if spike is not None else prediction, s)
      W = W + u
    if correction.startswith("predict"):  # gradients where the pending motion takes W
      xs = [W + drift(inner, s, 1) for _ in range(N)]
    elif correction.startswith("replay"):  # ... the next update, were the mean g_i
      xs = []
      for g in grads:
        guess = a * g + (1 - a) * prediction
        if spike is not None:
          guess = spike.feed(guess, 1, commit=False)
        xs.append(W + inner.update(guess, s)[0])
    else:
      xs = [W.copy() for _ in range(N)]
    pending = grads
    history.append([x.copy() for x in xs])
  return np.array(history), W


def local_sgd(grad, x0, N, T, inner, period, schedules=None, weighted=False, adapt="fixed",
              outer=None, average_inner_state=False):
  """local_sgd (weighted=False, every worker active) and oscars (weighted=True)."""
  xs = [x0.copy() for _ in range(N)]
  states = [inner.init(x0) for _ in range(N)]
  anchor, outer_state = x0.copy(), (outer.init(x0) if outer else None)
  tick, H, steps, loss_sums, first_loss = 0, period, [0] * N, [0.0] * N, None
  history, periods = [], []
  for t in range(T):
    active = schedules[t][0] if schedules is not None else [True] * N
    for i in range(N):
      if active[i]:
        g, loss = grad(t, i, xs[i])
        u, states[i] = inner.update(g, states[i])
        xs[i] = xs[i] + u
        steps[i] += 1
        loss_sums[i] += loss
    tick += 1
    if tick >= H:
      weights = [float(n) if weighted else 1.0 for n in steps]
      if sum(weights) > 0:
        average = sum(w * x for w, x in zip(weights, xs, strict=True)) / sum(weights)
      else:
        average = anchor.copy()
      if outer is None:
        anchor = average
      else:
        u, outer_state = outer.update(anchor - average, outer_state)
        anchor = anchor + u
      xs = [anchor.copy() for _ in range(N)]
      if average_inner_state:
        states = average_states(states)
      round_loss = sum(loss_sums) / max(sum(steps), 1)
      if adapt == "linear":
        H = H + 1
      elif adapt == "loss":
        first = first_loss if first_loss is not None else round_loss
        H = max(1, int(np.ceil(period * np.sqrt(round_loss / first))))
      if first_loss is None:
        first_loss = round_loss
      tick, steps, loss_sums = 0, [0] * N, [0.0] * N
    periods.append(H)
    history.append([x.copy() for x in xs])
  steps_arr = np.asarray(steps, float)
  weights = steps_arr if steps_arr.sum() > 0 else np.ones(N)
  model = sum(w * x for w, x in zip(weights, xs, strict=True)) / weights.sum()
  return np.array(history), model


def gossip(grad, x0, N, T, inner, graph="ring", order="combine_first"):
  """Each worker i mixes with the workers i + k mod N (k: the graph's offsets, written out
  here), weights 1 / (1 + peers); combine_first: x_i <- mix(x)_i + u_i(g_i(x_i));
  step_first: x_i <- mix(x + u)_i."""
  if N == 1:
    offsets = []
  elif graph == "ring":
    offsets = sorted({1, N - 1})
  elif graph == "exponential":
    offsets, k = set(), 1
    while k < N:
      offsets.add(k % N)
      k *= 2
    offsets = sorted(offsets)
  else:
    offsets = list(range(1, N))

  def mix(xs):
    return [(xs[i] + sum(xs[(i + k) % N] for k in offsets)) / (1 + len(offsets))
            for i in range(N)]

  xs, states, history = [x0.copy() for _ in range(N)], [inner.init(x0) for _ in range(N)], []
  for t in range(T):
    steps = []
    for i in range(N):
      u, states[i] = inner.update(grad(t, i, xs[i])[0], states[i])
      steps.append(u)
    if order == "combine_first":
      xs = [m + u for m, u in zip(mix(xs), steps, strict=True)]
    else:
      xs = mix([x + u for x, u in zip(xs, steps, strict=True)])
    history.append([x.copy() for x in xs])
  return np.array(history), np.mean(xs, axis=0)


def easgd(grad, x0, N, T, inner, alpha=None, period=1):
  """Synchronous EASGD, the paper's eq. (5)-(6) every `period` ticks: from the same x_i and
  center c, x_i <- x_i + u_i(g_i(x_i)) - alpha (x_i - c), c <- c + alpha sum_i (x_i - c);
  otherwise x_i <- x_i + u_i. Each worker its own inner state; the model is c."""
  alpha = 0.9 / N if alpha is None else alpha
  xs, states, center = [x0.copy() for _ in range(N)], [inner.init(x0) for _ in range(N)], x0.copy()
  history, tick = [], 0
  for t in range(T):
    steps = []
    for i in range(N):
      u, states[i] = inner.update(grad(t, i, xs[i])[0], states[i])
      steps.append(u)
    tick += 1
    if tick >= period:
      distances = [x - center for x in xs]
      xs = [x + u - alpha * d for x, u, d in zip(xs, steps, distances, strict=True)]
      center = center + alpha * sum(distances)
      tick = 0
    else:
      xs = [x + u for x, u in zip(xs, steps, strict=True)]
    history.append([x.copy() for x in xs])
  return np.array(history), center


def streaming_diloco(grad, x0, N, T, inner, period, fragments=1, delay=0, mixing=0.0,
                     outer=None):
  """Fragment p = x[d p // P : d (p + 1) // P]; from step o_p = H (p + 1) // P on, every H
  steps each worker sends theta_p - x_{i,p}; `delay` steps later theta_p steps by the outer
  optimizer on their mean (plain averaging: theta_p - mean) and x_{i,p} <- mixing x_{i,p} +
  (1 - mixing) theta_p. Steps are counted from 1."""
  d = len(x0)
  cuts = [d * p // fragments for p in range(fragments + 1)]
  parts = [slice(cuts[p], cuts[p + 1]) for p in range(fragments)]
  offsets = [period * (p + 1) // fragments for p in range(fragments)]
  xs = [x0.copy() for _ in range(N)]
  states = [inner.init(x0) for _ in range(N)]
  theta = x0.copy()
  outer_states = [outer.init(x0[part]) if outer else None for part in parts]
  arriving = [None] * fragments
  history = []
  for t in range(T):
    step = t + 1
    for i in range(N):
      g, _ = grad(t, i, xs[i])
      u, states[i] = inner.update(g, states[i])
      xs[i] = xs[i] + u
    for p, part in enumerate(parts):
      if step >= offsets[p] and (step - offsets[p]) % period == 0:
        arriving[p] = sum(theta[part] - x[part] for x in xs) / N
      if step >= offsets[p] + delay and (step - offsets[p] - delay) % period == 0:
        if outer is None:
          theta[part] = theta[part] - arriving[p]
        else:
          u, outer_states[p] = outer.update(arriving[p], outer_states[p])
          theta[part] = theta[part] + u
        for x in xs:
          x[part] = mixing * x[part] + (1 - mixing) * theta[part]
    history.append([x.copy() for x in xs])
  return np.array(history), sum(xs) / N


class Case(NamedTuple):
  """A strategy with options (as a config writes them), its reference, and the schedules
  it is checked under ("homogeneous" or "heterogeneous")."""

  strategy: str
  options: dict
  reference: Callable  # ((grad, x0, N, T), inner, schedules) -> (history, model)
  schedules: str


CASES: dict[str, Case] = {}


def add_case(name: str, strategy: str, options: dict, reference: Callable,
             schedules: str = "homogeneous") -> None:
  """Checks `strategy` with `options` against `reference` in tests/test_exact_math.py (a
  strategy written in a test adds its own case this way)."""
  if name in CASES:
    raise ValueError(f"reference case {name!r} exists; choose another name")
  CASES[name] = Case(strategy, options, reference, schedules)


# name: (strategy, options, reference, schedules)
_BUILT_IN = {
    "ssgd": ("ssgd", {}, lambda p, inner, sch: ssgd(*p, inner), "homogeneous"),
    "asgd": ("asgd", {}, lambda p, inner, sch: asgd(*p, inner, sch),
             "heterogeneous"),
    "asgd_homogeneous": ("asgd", {}, lambda p, inner, sch: asgd(*p, inner, sch),
                         "homogeneous"),
    "dc_asgd": ("asgd", {"delay_compensation": 0.5},
                lambda p, inner, sch: asgd(*p, inner, sch,
                                            delay_compensation=0.5), "heterogeneous"),
    "asgd_spike": ("asgd", {"correction": "spike", "inner_momentum": 0.8},
                   lambda p, inner, sch: asgd(*p, inner, sch,
                                               correction="spike", inner_momentum=0.8),
                   "heterogeneous"),
    "asgd_predict_dc": ("asgd", {"correction": "predict", "delay_compensation": 0.5},
                        lambda p, inner, sch: asgd(*p, inner, sch,
                                                    delay_compensation=0.5, correction="predict"),
                        "heterogeneous"),
    "ssp": ("ssp", {"staleness": 1},
            lambda p, inner, sch: ssp(*p, inner, sch, staleness=1),
            "heterogeneous"),
    "ssp_bsp": ("ssp", {"staleness": 0},
                lambda p, inner, sch: ssp(*p, inner, sch, staleness=0),
                "heterogeneous"),
    "odsgd_sgd": ("odsgd", {"local_lr": 0.05, "warmup_steps": 3},
                  lambda p, inner, sch: odsgd(*p, inner, 0.05, warmup_steps=3),
                  "homogeneous"),
    "odsgd_momentum": ("odsgd", {"local_lr": 0.05, "local_optimizer": "momentum",
                                 "warmup_steps": 0, "local_weight_decay": 0.01},
                       lambda p, inner, sch: odsgd(*p, inner, 0.05, "momentum",
                                                    0, local_weight_decay=0.01), "homogeneous"),
    "odsgd_dcasgd": ("odsgd", {"local_lr": 0.05, "local_optimizer": "dcasgd", "warmup_steps": 2,
                               "dc_lambda": 2.0},
                     lambda p, inner, sch: odsgd(*p, inner, 0.05, "dcasgd", 2,
                                                  dc_lambda=2.0), "homogeneous"),
    "odsgd_replay": ("odsgd", {"local_lr": 0.0, "local_optimizer": "replay", "warmup_steps": 2},
                     lambda p, inner, sch: odsgd(*p, inner, 0.0, "replay", 2),
                     "homogeneous"),
    "odsgd_replay_spike": ("odsgd", {"local_lr": 0.0, "local_optimizer": "replay",
                                     "warmup_steps": 2, "correction": "spike"},
                           lambda p, inner, sch: odsgd(*p, inner, 0.0,
                                                        "replay", 2, correction="spike"),
                           "homogeneous"),
    "odsgd_dcasgd_predict_spike": (
        "odsgd", {"local_lr": 0.05, "local_optimizer": "dcasgd", "warmup_steps": 2,
                  "correction": "predict+spike", "inner_momentum": 0.7},
        lambda p, inner, sch: odsgd(*p, inner, 0.05, "dcasgd", 2,
                                     correction="predict+spike", inner_momentum=0.7),
        "homogeneous"),
    "pseudo_sync": ("pseudo_sync", {},
                    lambda p, inner, sch: pseudo_sync(*p, inner),
                    "homogeneous"),
    "pseudo_sync_fixed": ("pseudo_sync", {"confidence": "fixed", "alpha": 0.3},
                          lambda p, inner, sch: pseudo_sync(*p, inner, "fixed",
                                                             alpha=0.3), "homogeneous"),
    "pseudo_sync_predict_spike": ("pseudo_sync", {"correction": "predict+spike"},
                                  lambda p, inner, sch: pseudo_sync(
                                      *p, inner, correction="predict+spike"),
                                  "homogeneous"),
    "pseudo_sync_replay": ("pseudo_sync", {"confidence": "fixed", "alpha": 0.6,
                                           "correction": "replay"},
                           lambda p, inner, sch: pseudo_sync(*p, inner,
                                                              "fixed", alpha=0.6,
                                                              correction="replay"),
                           "homogeneous"),
    "pseudo_sync_replay_spike": ("pseudo_sync", {"correction": "replay+spike",
                                                 "inner_momentum": 0.8},
                                 lambda p, inner, sch: pseudo_sync(
                                     *p, inner, correction="replay+spike",
                                     inner_momentum=0.8), "homogeneous"),
    "local_sgd": ("local_sgd", {"period": 3},
                  lambda p, inner, sch: local_sgd(*p, inner, 3),
                  "homogeneous"),
    "local_sgd_diloco": ("local_sgd", {"period": 4, "average_inner_state": True,
                                       "outer": {"learning_rate": 0.7, "momentum": 0.9,
                                                 "nesterov": True}},
                         lambda p, inner, sch: local_sgd(
                             *p, inner, 4, average_inner_state=True,
                             outer=SGD(0.7, momentum=0.9, nesterov=True)), "homogeneous"),
    "oscars_fixed": ("oscars", {"period": 3},
                     lambda p, inner, sch: local_sgd(*p, inner, 3, sch,
                                                      weighted=True), "heterogeneous"),
    "oscars_linear": ("oscars", {"period": 2, "adapt": "linear"},
                      lambda p, inner, sch: local_sgd(*p, inner, 2, sch,
                                                       weighted=True, adapt="linear"),
                      "heterogeneous"),
    "oscars_loss": ("oscars", {"period": 4, "adapt": "loss"},
                    lambda p, inner, sch: local_sgd(*p, inner, 4, sch,
                                                     weighted=True, adapt="loss"),
                    "heterogeneous"),
}

_BUILT_IN.update({
    f"gossip_{graph}_{order}": (
        "gossip", {"graph": graph, "order": order},
        lambda p, inner, sch, graph=graph, order=order: gossip(*p, inner, graph, order),
        "homogeneous")
    for graph in ("ring", "exponential", "complete") for order in ("combine_first", "step_first")
})

_BUILT_IN.update({
    "easgd": ("easgd", {}, lambda p, inner, sch: easgd(*p, inner), "homogeneous"),
    "easgd_period_3": ("easgd", {"alpha": 0.15, "period": 3},
                       lambda p, inner, sch: easgd(*p, inner, alpha=0.15, period=3),
                       "homogeneous"),
})

_BUILT_IN.update({
    "streaming_diloco": ("streaming_diloco", {"period": 4, "fragments": 2, "delay": 1,
                                              "mixing": 0.5},
                         lambda p, inner, sch: streaming_diloco(*p, inner, 4, 2, 1, 0.5),
                         "homogeneous"),
    "streaming_diloco_nesterov": (
        "streaming_diloco", {"period": 6, "fragments": 3, "delay": 0, "mixing": 0.0,
                             "outer": {"learning_rate": 0.7, "momentum": 0.9,
                                       "nesterov": True}},
        lambda p, inner, sch: streaming_diloco(*p, inner, 6, 3, 0, 0.0,
                                               SGD(0.7, momentum=0.9, nesterov=True)),
        "homogeneous"),
})

for _name, _case in _BUILT_IN.items():
  add_case(_name, *_case)
