"""Flax models, looked up by name from a config."""

import dataclasses
from typing import Any

import flax.linen as nn

from odsgd_jax.models._resnet import ResNet20 as ResNet20
from odsgd_jax.models._resnet import ResNet50 as ResNet50
from odsgd_jax.models._simple import CNN1D as CNN1D
from odsgd_jax.models._simple import MLP as MLP
from odsgd_jax.models._simple import LeNet5 as LeNet5
from odsgd_jax.models._vgg import VGG16 as VGG16

MODELS: dict[str, type[nn.Module]] = {
    "mlp": MLP,
    "cnn1d": CNN1D,
    "lenet5": LeNet5,
    "resnet20": ResNet20,
    "resnet50": ResNet50,
    "vgg16": VGG16,
}


def model_options(name: str) -> dict[str, Any]:
  """Constructor fields of model `name` that a config may set, with defaults."""
  return {
      f.name: f.default
      for f in dataclasses.fields(MODELS[name])
      if f.init and f.name not in ("num_classes", "parent", "name")
  }


def make_model(name: str, num_classes: int, **options: Any) -> nn.Module:
  """Builds model `name` for `num_classes` outputs with the given options."""
  if name not in MODELS:
    raise KeyError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
  return MODELS[name](num_classes=num_classes, **options)


# After make_model, which it uses.
from odsgd_jax.models._profile import gradient_profile as gradient_profile  # noqa: E402
