"""Flax models, looked up by name from a config."""

import dataclasses
from typing import Any

import flax.linen as nn

from odsgd_jax import domains
from odsgd_jax.models._resnet import ResNet20 as ResNet20
from odsgd_jax.models._resnet import ResNet50 as ResNet50
from odsgd_jax.models._simple import CNN1D as CNN1D
from odsgd_jax.models._simple import MLP as MLP
from odsgd_jax.models._simple import LeNet5 as LeNet5
from odsgd_jax.models._transformer import Transformer as Transformer
from odsgd_jax.models._vgg import VGG16 as VGG16

MODELS: dict[str, type[nn.Module]] = {
    "mlp": MLP,
    "cnn1d": CNN1D,
    "lenet5": LeNet5,
    "resnet20": ResNet20,
    "resnet50": ResNet50,
    "vgg16": VGG16,
    "transformer": Transformer,
}


def _sizes(*, allow_empty: bool = False) -> domains.Domain:
  """A tuple (or list) of layer sizes, each an integer >= 1."""
  def problem(value: Any) -> str | None:
    if not isinstance(value, (tuple, list)):
      return "is not a tuple of integers"
    if not value and not allow_empty:
      return "is empty"
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value):
      return "holds a size that is not an integer >= 1"
    return None
  return domains.Domain("other", check=problem,
                        text=f"a{'' if allow_empty else ' non-empty'} tuple of integers >= 1")


_DROPOUT = domains.real(0, 1, high_open=True)
# Every option a config may set, by model: checked with the config, before any data is
# read (tests/test_domains.py checks that each constructor field has one).
DOMAINS: dict[str, dict[str, domains.Domain]] = {
    "mlp": {"hidden_sizes": _sizes(allow_empty=True), "dropout_rate": _DROPOUT},
    "cnn1d": {"channels": domains.integer(1), "dropout_rate": _DROPOUT},
    "lenet5": {},
    "resnet20": {"widths": _sizes(), "blocks_per_stage": domains.integer(1)},
    "resnet50": {"stage_sizes": _sizes()},
    "vgg16": {"dropout_rate": _DROPOUT},
    "transformer": {"width": domains.integer(1), "depth": domains.integer(1),
                    "heads": domains.integer(1), "mlp_ratio": domains.integer(1),
                    "max_length": domains.integer(1), "dropout_rate": _DROPOUT},
}


def model_options(name: str) -> dict[str, Any]:
  """Constructor fields of model `name` that a config may set, with defaults."""
  return {
      f.name: f.default
      for f in dataclasses.fields(MODELS[name])
      if f.init and f.name not in ("num_classes", "parent", "name")
  }


def register_model(name: str, module: type[nn.Module],
                   options: dict[str, domains.Domain] | None = None) -> None:
  """Makes `module` (a flax module taking `num_classes`: its outputs' size, and the options
  a config may set, with defaults) known as model `name`; `options`: each option's domain,
  checked with the config (an option without one is taken as given)."""
  fields = {f.name for f in dataclasses.fields(module) if f.init}
  if "num_classes" not in fields:
    raise ValueError(f"model {name!r}: {module.__name__} has no num_classes field (its "
                     f"outputs' size: the classes, or the vocabulary)")
  MODELS[name] = module
  DOMAINS[name] = dict(options or {})


def make_model(name: str, num_classes: int, **options: Any) -> nn.Module:
  """Builds model `name` for `num_classes` outputs with the given options."""
  if name not in MODELS:
    raise KeyError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
  return MODELS[name](num_classes=num_classes, **options)


# After make_model, which it uses.
from odsgd_jax.models._profile import gradient_profile as gradient_profile  # noqa: E402
