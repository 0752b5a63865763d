"""A decoder-only transformer for next-token prediction (issue 76): token and learned
position embeddings, pre-LayerNorm blocks of causal self-attention and an MLP, a final
LayerNorm, and the output read through the token embedding (tied)."""

import flax.linen as nn
import jax.numpy as jnp


class Block(nn.Module):
  width: int
  heads: int
  mlp_ratio: int
  dropout_rate: float

  @nn.compact
  def __call__(self, x, mask, train: bool):
    h = nn.LayerNorm()(x)
    h = nn.MultiHeadDotProductAttention(
        num_heads=self.heads, qkv_features=self.width, dropout_rate=self.dropout_rate,
        deterministic=not train)(h, h, mask=mask)
    x = x + nn.Dropout(self.dropout_rate, deterministic=not train)(h)
    h = nn.Dense(self.mlp_ratio * self.width)(nn.LayerNorm()(x))
    h = nn.Dense(self.width)(nn.gelu(h))
    return x + nn.Dropout(self.dropout_rate, deterministic=not train)(h)


class Transformer(nn.Module):
  """Logits over the `num_classes` tokens (the vocabulary) at every position.

  Attributes:
    width: the residual stream's size; heads divide it.
    depth: blocks.
    max_length: the longest sequence (the learned positions).
  """

  num_classes: int
  width: int = 128
  depth: int = 2
  heads: int = 4
  mlp_ratio: int = 4
  max_length: int = 128
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, tokens, train: bool = False):
    # token ids; the clock's profile traces every model on float zeros
    tokens = tokens.astype(jnp.int32)
    embed = nn.Embed(self.num_classes, self.width,
                     embedding_init=nn.initializers.normal(stddev=0.02))
    positions = self.param("positions", nn.initializers.normal(stddev=0.02),
                           (self.max_length, self.width))
    x = embed(tokens) + positions[:tokens.shape[1]]
    x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
    mask = nn.make_causal_mask(tokens)
    for _ in range(self.depth):
      x = Block(self.width, self.heads, self.mlp_ratio, self.dropout_rate)(x, mask, train)
    return embed.attend(nn.LayerNorm()(x))
