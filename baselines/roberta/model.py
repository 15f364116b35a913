"""RoBERTa-medium built from a config (never downloaded), with relative key-query position embeddings.

Banyan paper, appendix A: "RoBERTa medium [...] 8 layers, 8 attention heads and 2048 dimensional feedforward
layers [...] relative key-query positional embeddings". The hidden size is not stated; Table 6 counts RoBERTa (M)
at ≈10M non-embedding parameters ("we exclude the embedding matrix and LM head"), which with those 8 layers and
FFN 2048 is hidden 256: 8 × (4·256² + 2·256·2048) ≈ 10.5M (shape ``table6``, the default). Turc et al.'s
"medium", which the text also names, is hidden 512: 25.2M (shape ``turc_medium``).

Why this module patches the attention: ``transformers`` 5.x dropped ``position_embedding_type`` from RoBERTa (the
config key is accepted and silently ignored), so ``relative_key_query`` (Huang et al. 2020, "method 4") is
re-implemented here exactly as transformers 4.x did it:
  scores = (q.k + q.r(i-j) + k.r(i-j)) / sqrt(d_head) + mask,  r = Embedding(2 * max_positions - 1, d_head),
and, as in 4.x, no absolute position embedding is added when relative positions are used. The position terms are one
additive bias per (query, key) pair, so the attention runs through torch's fused ``scaled_dot_product_attention`` with
that bias as its float mask (``attention="sdpa"``, default); ``attention="eager"`` is the explicit 4.x computation
(softmax of the summed scores), kept as the reference the fused path is tested against.

Masks are *segment* masks: every position carries the index of the sentence it belongs to (-1 = padding) and a query
attends only to keys of its own segment (block-diagonal). One segment per row is ordinary padding; several per row
is packing (``baselines.roberta.data.pack``). Because positions are relative (only i - j enters), a sentence packed
at offset 40 of a row sees exactly the scores it would see alone: position ids restart per sentence by construction.

Vocabulary: the language's SentencePiece pieces are ids 0..V-1 and pad = V (``strae.data.tokenizer`` contract). RoBERTa
also needs a mask token and sentence delimiters; they are appended AFTER pad so piece ids never move:
  pad = V, mask = V + 1, bos (<s>) = V + 2, eos (</s>) = V + 3; embedding rows = V + 4.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

N_SPECIAL_TOKENS = 4  # pad, mask, bos, eos (in that order, starting at V)


@dataclass(frozen=True)
class SpecialIds:
    """Ids of the tokens RoBERTa adds on top of a V-piece SentencePiece vocabulary."""

    n_pieces: int

    @property
    def pad(self) -> int:
        return self.n_pieces

    @property
    def mask(self) -> int:
        return self.n_pieces + 1

    @property
    def bos(self) -> int:
        return self.n_pieces + 2

    @property
    def eos(self) -> int:
        return self.n_pieces + 3

    @property
    def vocab_size(self) -> int:
        return self.n_pieces + N_SPECIAL_TOKENS

    def to_dict(self) -> dict[str, int]:
        return {"n_pieces": self.n_pieces, "pad": self.pad, "mask": self.mask, "bos": self.bos, "eos": self.eos,
                "vocab_size": self.vocab_size}


# Named shapes (``strae train-roberta --shape``): the Banyan paper's 8 layers / 8 heads / FFN 2048 with the hidden size
# its Table 6 count implies (default), or Turc et al.'s "medium" hidden size that its text names.
SHAPES: dict[str, dict[str, int]] = {
    "table6": {"num_hidden_layers": 8, "num_attention_heads": 8, "hidden_size": 256, "intermediate_size": 2048},
    "turc_medium": {"num_hidden_layers": 8, "num_attention_heads": 8, "hidden_size": 512, "intermediate_size": 2048},
}
ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")


@dataclass
class RobertaShape:
    """Architecture hyper-parameters; defaults = RoBERTa-medium as the Banyan paper counts it (shape ``table6``)."""

    n_pieces: int  # SentencePiece vocabulary size V (pad = V)
    num_hidden_layers: int = 8
    num_attention_heads: int = 8
    hidden_size: int = 256
    intermediate_size: int = 2048
    # Only relative_key_query is implemented (the paper's choice); the key is recorded for provenance.
    position_embedding_type: str = "relative_key_query"
    max_position_embeddings: int = 514  # longest input incl. <s></s>; RoBERTa's value
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RobertaShape:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise SystemExit(f"roberta model config: unknown keys {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)

    @property
    def special(self) -> SpecialIds:
        return SpecialIds(self.n_pieces)


class RelativeKeyQuerySelfAttention(nn.Module):
    """Drop-in replacement for ``RobertaSelfAttention`` adding relative key-query position scores.

    ``attention_mask``: bool (True = attend) or additive float, broadcastable to (B, H, L, L); ``implementation``:
    ``sdpa`` (fused kernel, position scores as its additive mask) or ``eager`` (transformers 4.x's explicit softmax).
    """

    implementation: str = "sdpa"

    def __init__(self, original: nn.Module, max_position_embeddings: int):
        super().__init__()
        self.num_attention_heads = original.num_attention_heads
        self.attention_head_size = original.attention_head_size
        self.query, self.key, self.value = original.query, original.key, original.value
        self.dropout = original.dropout
        self.max_position_embeddings = max_position_embeddings
        self.distance_embedding = nn.Embedding(2 * max_position_embeddings - 1, self.attention_head_size)
        nn.init.normal_(self.distance_embedding.weight, std=0.02)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any):
        batch, length, _ = hidden_states.shape
        if length > self.max_position_embeddings:
            raise ValueError(f"sequence length {length} exceeds max_position_embeddings {self.max_position_embeddings}")
        shape = (batch, length, self.num_attention_heads, self.attention_head_size)
        query = self.query(hidden_states).view(shape).transpose(1, 2)  # (B, H, L, D)
        key = self.key(hidden_states).view(shape).transpose(1, 2)
        value = self.value(hidden_states).view(shape).transpose(1, 2)

        positions = torch.arange(length, device=hidden_states.device)
        distance = positions[:, None] - positions[None, :]  # (L, L): i - j
        relative = self.distance_embedding(distance + self.max_position_embeddings - 1).to(query.dtype)  # (L, L, D)
        # q_i . r_(i-j)  and  k_j . r_(i-j), both (B, H, L, L)
        position_scores = torch.einsum("bhld,lrd->bhlr", query, relative) + torch.einsum(
            "bhrd,lrd->bhlr", key, relative
        )
        bias = position_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            if attention_mask.dtype == torch.bool:  # True = attend
                bias = bias.masked_fill(~attention_mask, torch.finfo(bias.dtype).min)
            else:  # additive float mask (0 = attend, large negative = masked)
                bias = bias + attention_mask.to(bias.dtype)
        if self.implementation == "sdpa":
            output = F.scaled_dot_product_attention(
                query, key, value, attn_mask=bias, dropout_p=self.dropout.p if self.training else 0.0
            )
        elif self.implementation == "eager":  # transformers 4.x: softmax(qk/sqrt(d) + position + mask), dropout, @ v
            scores = query @ key.transpose(-1, -2) / math.sqrt(self.attention_head_size) + bias
            output = self.dropout(scores.softmax(-1)) @ value
        else:
            raise ValueError(f"attention implementation {self.implementation!r}: expected one of "
                             f"{ATTENTION_IMPLEMENTATIONS}")
        return output.transpose(1, 2).reshape(batch, length, -1), None


class _NoAbsolutePositions(nn.Module):
    """Stands in for ``position_embeddings`` when positions are relative: adds nothing (transformers 4.x behaviour)."""

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        return torch.zeros((*position_ids.shape, 1), device=position_ids.device)


def build_mlm_model(shape: RobertaShape, attention: str = "sdpa"):
    """A freshly initialised ``RobertaForMaskedLM`` of the given shape (no weights are downloaded)."""
    from transformers import RobertaConfig, RobertaForMaskedLM

    if shape.position_embedding_type != "relative_key_query":
        raise SystemExit(
            f"position_embedding_type {shape.position_embedding_type!r}: only relative_key_query is implemented"
        )
    special = shape.special
    config = RobertaConfig(
        vocab_size=special.vocab_size,
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        intermediate_size=shape.intermediate_size,
        hidden_dropout_prob=shape.hidden_dropout_prob,
        attention_probs_dropout_prob=shape.attention_probs_dropout_prob,
        # RoBERTa numbers positions from pad+1 (= V+1 here) and indexes a token-type buffer with them, so the
        # table must span pad+1+length; it is replaced below by a parameter-free no-op (relative positions only).
        max_position_embeddings=special.pad + 1 + shape.max_position_embeddings,
        type_vocab_size=1,
        pad_token_id=special.pad,
        bos_token_id=special.bos,
        eos_token_id=special.eos,
    )
    # eager: the encoder hands each layer an additive float mask (or None), which the patched attention adds to.
    config._attn_implementation = "eager"
    model = RobertaForMaskedLM(config)
    model.roberta.embeddings.position_embeddings = _NoAbsolutePositions()
    for layer in model.roberta.encoder.layer:
        layer.attention.self = RelativeKeyQuerySelfAttention(layer.attention.self, shape.max_position_embeddings)
    set_attention_implementation(model, attention)
    return model


def set_attention_implementation(model: nn.Module, implementation: str) -> None:
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise SystemExit(f"attention {implementation!r}: expected one of {ATTENTION_IMPLEMENTATIONS}")
    for module in model.modules():
        if isinstance(module, RelativeKeyQuerySelfAttention):
            module.implementation = implementation


def segments_from_attention(attention_mask: torch.Tensor) -> torch.Tensor:
    """Segment ids of a padded batch (one sentence per row): 0 on tokens, -1 on padding."""
    return torch.where(attention_mask.bool(), 0, -1)


def encode(roberta: nn.Module, input_ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """Last hidden states, (B, L, hidden), with block-diagonal attention: a position attends only to its own segment.

    ``roberta`` is a ``RobertaModel`` from :func:`build_mlm_model` (``model.roberta``). This bypasses transformers'
    own mask construction (which knows only key padding) and hands each layer the boolean segment mask. Padding
    positions (segment -1) attend to each other, so no softmax row is empty; their outputs are never used.
    """
    same_segment = (segments[:, :, None] == segments[:, None, :]).unsqueeze(1)  # (B, 1, L, L)
    # RoBERTa numbers positions from pad + 1; restarting per segment is for the record only (positions are relative)
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    index = torch.arange(segments.shape[1], device=segments.device).expand_as(segments)
    segment_start = torch.cummax(torch.where(starts, index, torch.zeros_like(index)), dim=1).values
    position_ids = index - segment_start + roberta.config.pad_token_id + 1
    hidden = roberta.embeddings(input_ids=input_ids, position_ids=position_ids)
    for layer in roberta.encoder.layer:
        hidden = layer(hidden, same_segment)
    return hidden


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over non-pad positions (<s> and </s> included, as SimCSE's ``avg`` pooler does)."""
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)


POOLERS = ("mean", "cls_before_pooler", "cls")


class SimcseMLP(nn.Module):
    """SimCSE's training pooler head over the [CLS] (= <s>) state: dense + tanh (princeton-nlp/SimCSE
    ``simcse/models.py``: ``MLPLayer``), initialised as transformers initialises a new Linear (N(0, 0.02), bias 0)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(features))


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooler: str, mlp: nn.Module | None = None) -> torch.Tensor:
    """Sentence vectors of a padded batch (one sentence per row, <s> at position 0), SimCSE's pooler names:
    ``mean`` (SimCSE ``avg``: mean over non-pad positions), ``cls_before_pooler`` (the <s> state),
    ``cls`` (the <s> state through the trained MLP ``mlp``)."""
    if pooler == "mean":
        return mean_pool(hidden, attention_mask)
    if pooler == "cls_before_pooler":
        return hidden[:, 0]
    if pooler == "cls":
        if mlp is None:
            raise SystemExit("pooler 'cls' needs the SimCSE MLP head, which this run does not have "
                             "(it was not trained with --train-pooler cls); use mean or cls_before_pooler")
        return mlp(hidden[:, 0])
    raise SystemExit(f"pooler {pooler!r}: expected one of {POOLERS}")


def non_embedding_parameter_count(model: nn.Module) -> int:
    """Parameters outside ``nn.Embedding`` modules. On ``model.roberta`` (no LM head) this is Banyan Table 6's
    convention: the transformer layers (+ the embedding LayerNorm), without the embedding matrices (token, and the
    relative-position tables) and without the LM head."""
    embedding_ids = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    seen: set[int] = set()
    total = 0
    for parameter in model.parameters():
        if id(parameter) in seen or id(parameter) in embedding_ids:
            continue
        seen.add(id(parameter))
        total += parameter.numel()
    return total
