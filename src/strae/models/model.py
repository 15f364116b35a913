"""StraeModel: Self-StrAE and Banyan as one engine (structure x functions x objective switches).

Forward for a padded batch: pack the tokens -> greedy structure induction under no_grad on dropout-free
embeddings (``trees.induce``) -> the sentential or entangled graph (``trees.build_graph``) -> a differentiable
up pass (composition, level by level) and down pass (decomposition, level by level; a node's downward
embedding is the mean of its parents' messages, plus its own upward embedding as the context of a sentence it
is the root of) with dropout -> objective.
"""
from __future__ import annotations

import torch
from torch import nn

from strae.models.config import ModelConfig
from strae.models.functions import make_functions
from strae.models.trees import Graph, Induction, PackedBatch, build_graph, induce, pack_batch
from strae.objectives import leaf_cross_entropy, symmetric_contrastive


def fast_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout drawing 16 random bits per element from 64-bit draws (4 elements per draw).

    Same semantics as ``F.dropout(x, p, training=True)`` up to a keep probability quantised to 1/65536; about
    3x cheaper on CPU, where generating one random number per element dominated the whole up/down pass.
    """
    if p <= 0.0:
        return x
    n = x.numel()
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-2 ** 63, 2 ** 63 - 1)
    bits = draws.view(torch.int16)[:n].view(x.shape)
    keep = round((1.0 - p) * 65536)
    mask = (bits >= 32768 - keep).to(x.dtype).mul_(65536.0 / keep)
    return x * mask


class StraeModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        size = config.embedding_size
        # V + 1 rows: the pad id (== vocab_size) has a row so padded id tensors index safely; it is never read.
        self.embedding = nn.Embedding(config.vocab_size + 1, size)
        nn.init.uniform_(self.embedding.weight, -config.embedding_init_range, config.embedding_init_range)
        self.functions = make_functions(config.functions, config.k, config.u)
        # Banyan Eq. 4 / Self-StrAE: Lambda(e) = e Gamma, a bias-free projection (untied from the embedding).
        self.dembedding = nn.Linear(size, config.vocab_size, bias=False)

    # ----------------------------------------------------------------------------------------------- structure
    def non_embedding_parameter_count(self) -> int:
        """Composition + decomposition parameters (the papers' count; excludes embedding and dembedding)."""
        return sum(p.numel() for p in self.functions.parameters())

    def induce(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[PackedBatch, Induction]:
        packed = pack_batch(ids, lengths, self.config.vocab_size)
        leaves = self.embedding.weight.detach()[packed.tokens]
        return packed, induce(leaves, packed, self.functions.compose)

    def graph(self, ids: torch.Tensor, lengths: torch.Tensor, structure: str | None = None) -> Graph:
        packed, induction = self.induce(ids, lengths)
        return build_graph(induction, packed.tokens, structure or self.config.structure)

    # ------------------------------------------------------------------------------------------ message passing
    def propagate(self, graph: Graph, dropout: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable up and down passes over ``graph``; returns (up, down), each (n_nodes, E) in node order."""
        if dropout is None:
            dropout = self.training
        p_embedding = self.config.embedding_dropout if dropout else 0.0
        p_function = self.config.function_dropout if dropout else 0.0

        def embedding_dropout(x: torch.Tensor) -> torch.Tensor:
            return fast_dropout(x, p_embedding)

        def function_dropout(x: torch.Tensor) -> torch.Tensor:
            return fast_dropout(x, p_function)

        n_levels, size = graph.n_levels, self.config.embedding_size
        functions = self.functions
        # Nodes are grouped by level (leaves = level 0, a parent's level > both children's), so one batched
        # compose call per level computes every parent whose children are ready. Routes are precomputed index
        # maps: each level's output is scattered ("emitted") once into the slots of the levels that consume it,
        # which keeps autograd free of in-place writes into one big node tensor.
        pending_up: list[list[torch.Tensor]] = [[] for _ in range(n_levels)]
        pending_down: list[list[torch.Tensor]] = [[] for _ in range(n_levels)]
        # Leaves: entangled graphs hold one leaf per unique token, sentential graphs one per occurrence.
        ups: list[torch.Tensor] = [embedding_dropout(self.embedding(graph.leaf_tokens))]
        graph.up_route.emit(0, ups[0], pending_up)
        for level in range(1, n_levels):
            children = graph.up_route.in_slot_order(level, pending_up)
            pending_up[level] = []
            up = function_dropout(functions.compose(children.view(-1, 2, size)))
            ups.append(up)
            graph.up_route.emit(level, up, pending_up)
        # Down pass, top level first. A node with several parents (entangled: the same constituent in several
        # contexts) receives one message per (parent, side); their mean is its resolved downward embedding
        # (Banyan §3.1). A sentence root has no parent, so its own upward embedding is the message it receives.
        downs: list[torch.Tensor] = [None] * n_levels  # type: ignore[list-item]
        for level in reversed(range(n_levels)):
            start, stop = graph.level_offsets[level], graph.level_offsets[level + 1]
            total = ups[level].new_zeros(stop - start, size)
            messages = graph.down_route.received(level, pending_down)
            pending_down[level] = []
            if messages is not None:
                total = total.index_add(0, graph.down_route.slots(level), messages)
            roots = graph.root_local.get(level)
            if roots is not None:
                total = total.index_add(0, roots, ups[level].index_select(0, roots))
            down = total / graph.down_count[start:stop].to(total.dtype).unsqueeze(1)
            downs[level] = down
            if level > 0:
                out = function_dropout(functions.decompose(down))
                graph.down_route.emit(level, out.reshape(-1, size), pending_down)
        return torch.cat(ups), torch.cat(downs)

    # ----------------------------------------------------------------------------------------------- public API
    def loss(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        # Structure is induced without gradients; only the message passing below is differentiated, as in the
        # reference models (the merge order is a discrete choice with no gradient anyway).
        graph = self.graph(ids, lengths)
        n_leaf_nodes = graph.level_offsets[1]  # node order puts all leaves first
        up, down = self.propagate(graph)
        bf16 = cfg.bf16_vocab_projection
        ce = contrastive = None
        if cfg.objective == "ce":
            ce = leaf_cross_entropy(self.dembedding, down[:n_leaf_nodes], graph.leaf_tokens, bf16)
            loss = ce
        elif cfg.objective == "contrastive":
            contrastive = symmetric_contrastive(up, down, cfg.temperature, bf16)
            loss = contrastive
        elif cfg.objective == "ceco":
            # CE where a vocabulary exists (leaves), contrastive where it does not (internal nodes): SemEval Eq. 3.
            ce = leaf_cross_entropy(self.dembedding, down[:n_leaf_nodes], graph.leaf_tokens, bf16)
            contrastive = symmetric_contrastive(up[n_leaf_nodes:], down[n_leaf_nodes:], cfg.temperature, bf16)
            loss = 0.5 * (ce + contrastive)
        elif cfg.objective == "strcse":
            # Second pass over the same structure with fresh dropout masks (SemEval-2024 appendix A).
            _, down_second = self.propagate(graph)
            ce = 0.5 * (leaf_cross_entropy(self.dembedding, down[:n_leaf_nodes], graph.leaf_tokens, bf16)
                        + leaf_cross_entropy(self.dembedding, down_second[:n_leaf_nodes], graph.leaf_tokens, bf16))
            contrastive = symmetric_contrastive(down[n_leaf_nodes:], down_second[n_leaf_nodes:], cfg.temperature,
                                                bf16)
            loss = 0.5 * (ce + contrastive)
        else:  # pragma: no cover - validated in the config
            raise ValueError(f"model config key 'objective': {cfg.objective!r}")
        metrics = {"loss": float(loss.detach()), "n_nodes": float(graph.n_nodes),
                   "n_tokens": float(sum(int(x) for x in lengths.tolist())), "n_sentences": float(ids.shape[0])}
        if ce is not None:
            metrics["ce"] = float(ce.detach())
        if contrastive is not None:
            metrics["contrastive"] = float(contrastive.detach())
        return loss, metrics

    @torch.no_grad()
    def encode(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, E) root upward embeddings (dropout-free; the induction already computed them)."""
        _, induction = self.induce(ids, lengths)
        return induction.up[induction.roots]

    @torch.no_grad()
    def node_counts(self, ids: torch.Tensor, lengths: torch.Tensor) -> dict[str, int]:
        """Total nodes (leaves included) of the batch's trees as sentential trees and as one entangled graph."""
        packed, induction = self.induce(ids, lengths)
        entangled = build_graph(induction, packed.tokens, "entangled")
        return {"sentential": int(induction.up.shape[0]), "entangled": int(entangled.n_nodes)}

    @torch.no_grad()
    def up_down(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Dropout-free (up, down) embeddings of every node of the configured structure; row i of both is node i."""
        return self.propagate(self.graph(ids, lengths), dropout=False)
