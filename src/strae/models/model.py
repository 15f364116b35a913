"""StraeModel: Self-StrAE and Banyan as one engine (structure x functions x objective switches).

Forward for a padded batch: pack the tokens -> greedy structure induction under no_grad (``trees.induce``; in
training, on dropped-out embeddings when the recipe says so, as both references do) -> the sentential or
entangled graph (``trees.build_graph``) -> a differentiable up pass (composition, level by level, re-applying
the induction's own dropout masks) and down pass (decomposition, level by level, fresh dropout; a node's
downward embedding is the mean of its parents' messages, plus its own upward embedding as the context of a
sentence it is the root of) -> the objective (``strae.objectives``, by name), which may run more passes.

The model takes its architecture from ``ModelConfig`` and its training behaviour (init ranges, dropouts, bias,
loss precision, induction dropout, decoder child order, temperature) from a ``Recipe`` (``strae/recipes.yaml``).
"""
from __future__ import annotations

import torch
from torch import nn

from strae.models.config import ModelConfig
from strae.models.dropout import apply_keep, fast_dropout
from strae.models.functions import make_functions
from strae.models.fused import INDUCTION_KERNELS, KernelChoice, choose_kernel, induce_fused
from strae.models.propagation import PROPAGATION_MODES, propagate_handwritten
from strae.models.propagation import self_check as levels_self_check
from strae.models.scatter import SCATTER_MODES
from strae.models.trees import Graph, Induction, InductionDropout, PackedBatch, build_graph, induce, pack_batch
from strae.objectives import create as create_objective
from strae.objectives.base import Pass, Passes
from strae.recipes import Recipe
from strae.recipes import load as load_recipe

__all__ = ["StraeModel", "fast_dropout"]


class StraeModel(nn.Module):
    def __init__(self, config: ModelConfig, recipe: Recipe | None = None, induction_kernel: str = "auto",
                 scatter: str = "index_add", propagation: str = "auto") -> None:
        super().__init__()
        config.validate()
        self.config = config
        # How the message passing sums rows (models/scatter.py): torch's index_add, or presorted on the host (no
        # sort per call under CUDA's deterministic mode). Same numbers either way; a speed choice.
        if scatter not in SCATTER_MODES:
            raise ValueError(f"scatter {scatter!r} is not one of {', '.join(SCATTER_MODES)}")
        self.scatter = scatter
        # How the up and down passes are differentiated (models/propagation.py): torch autograd over each level's
        # ops, or one function with a hand-derived backward, or auto (see propagation_mode). Same forward numbers.
        if propagation not in PROPAGATION_MODES:
            raise ValueError(f"propagation {propagation!r} is not one of {', '.join(PROPAGATION_MODES)}")
        self.propagation = propagation
        # The engine of the no-grad induction (models/fused.py): auto | torch | triton, resolved per device type.
        if induction_kernel not in INDUCTION_KERNELS:
            raise ValueError(f"induction_kernel {induction_kernel!r} is not one of {', '.join(INDUCTION_KERNELS)}")
        self.induction_kernel = induction_kernel
        self._kernel_choices: dict[str, KernelChoice] = {}
        self._levels_choices: dict[str, KernelChoice] = {}
        # No recipe given: the model family's reference-code recipe (the one `strae train --model` uses).
        self.recipe = recipe if recipe is not None else load_recipe(config.model)  # also builds self.objective
        if self.recipe.decoder_child_order == "node_id" and config.structure != "sentential":
            raise ValueError(f"recipe {self.recipe.name!r}: decoder_child_order node_id reproduces the Self-StrAE "
                             "reference decoder (sentential trees only); use position for entangled structures")
        size = config.embedding_size
        # V + 1 rows: the pad id (== vocab_size) has a row so padded id tensors index safely; it is never read.
        self.embedding = nn.Embedding(config.vocab_size + 1, size)
        r = self.recipe.embedding_init_range
        nn.init.uniform_(self.embedding.weight, -r, r)
        self.functions = make_functions(config.functions, config.k, config.u, gate_init=self.recipe.gate_init)
        # Lambda(e) = e Gamma (+ b): untied from the embedding. Both reference codes use nn.Linear's default bias;
        # both papers' equations have none (the `*_paper` recipes).
        self.dembedding = nn.Linear(size, config.vocab_size, bias=self.recipe.dembedding_bias)

    @property
    def recipe(self) -> Recipe:
        return self._recipe

    @recipe.setter
    def recipe(self, recipe: Recipe) -> None:
        # The objective takes the loss precision and temperature from the recipe: a new recipe, a new objective.
        self._recipe = recipe
        self.objective = create_objective(self.config.objective, precision=recipe.loss_precision,
                                          temperature=recipe.temperature)

    # ----------------------------------------------------------------------------------------------- structure
    def non_embedding_parameter_count(self) -> int:
        """Composition + decomposition parameters (the papers' count; excludes embedding and dembedding)."""
        return sum(p.numel() for p in self.functions.parameters())

    def induction_dropout(self, packed: PackedBatch, structure: str,
                          active: bool | None = None) -> InductionDropout | None:
        """The keyed dropout of this step's induction (training with ``recipe.induction_dropout`` only).

        The step seed is one draw from torch's generator, so runs stay seeded and resumable (RNG state is
        checkpointed); leaves are named by token (entangled) or by occurrence (sentential).
        """
        recipe = self.recipe
        if not ((self.training if active is None else active) and recipe.induction_dropout):
            return None
        seed = int(torch.randint(0, 2 ** 31 - 1, (1,)))
        ids = packed.tokens if structure == "entangled" else torch.arange(packed.tokens.numel(),
                                                                          device=packed.tokens.device)
        return InductionDropout(seed=seed, leaf_p=recipe.embedding_dropout, function_p=recipe.function_dropout,
                                leaf_ids=ids)

    def induce(self, ids: torch.Tensor, lengths: torch.Tensor, structure: str | None = None,
               dropout: bool | None = None) -> tuple[PackedBatch, Induction]:
        """Greedy trees of a padded batch; ``dropout`` None = as in training mode (model.training)."""
        packed = pack_batch(ids, lengths, self.config.vocab_size, device=self.embedding.weight.device)
        leaves = self.embedding.weight.detach()[packed.tokens]
        dropout = self.induction_dropout(packed, structure or self.config.structure, dropout)
        if self.kernel_choice(leaves.device).used == "triton":
            return packed, induce_fused(leaves, packed, self.functions, dropout)
        return packed, induce(leaves, packed, self.functions.compose, dropout)

    def kernel_choice(self, device: torch.device) -> KernelChoice:
        """Which engine induces on ``device`` (decided once per device type; ``record()`` goes to train.json)."""
        if device.type not in self._kernel_choices:
            self._kernel_choices[device.type] = choose_kernel(self.induction_kernel, device, self.functions)
        return self._kernel_choices[device.type]

    def propagation_mode(self, device: torch.device) -> str:
        """The passes' mode on ``device``. ``auto``: handwritten where the induction runs Triton (CUDA; on an H200
        3.4x Banyan's and 1.7x Self-StrAE's autograd step, docs/GPU.md "The handwritten passes"), autograd elsewhere (on
        CPU the two run at the same speed, and autograd's numbers stay those of every earlier CPU run)."""
        if self.propagation != "auto":
            return self.propagation
        return "handwritten" if self.kernel_choice(device).used == "triton" else "autograd"

    def levels_choice(self, device: torch.device) -> KernelChoice:
        """Which engine runs each level of the handwritten passes on ``device``: the Triton level kernels wherever
        the induction runs Triton (one switch, ``induction_kernel``) and they pass a first-use check against the
        torch levels, else the torch levels. Decided once per device type; ``record()`` goes to train.json."""
        if device.type not in self._levels_choices:
            induction = self.kernel_choice(device)
            if self.propagation_mode(device) != "handwritten":
                choice = KernelChoice("auto", "autograd", f"propagation {self.propagation}")
            elif induction.used != "triton":
                choice = KernelChoice("auto", "torch", "the induction runs torch")
            elif self.embedding.weight.dtype != torch.float32:
                choice = KernelChoice("auto", "torch", "the Triton levels are written for fp32")
            else:
                problem = levels_self_check(self, device)
                choice = (KernelChoice("auto", "torch", f"the Triton levels failed their first-use check: {problem}")
                          if problem else KernelChoice("auto", "triton", "the induction runs Triton; first-use "
                                                                         "check passed"))
            self._levels_choices[device.type] = choice
        return self._levels_choices[device.type]

    def graph(self, ids: torch.Tensor, lengths: torch.Tensor, structure: str | None = None) -> Graph:
        structure = structure or self.config.structure
        packed, induction = self.induce(ids, lengths, structure)
        return self.build(induction, packed, structure)

    def build(self, induction: Induction, packed: PackedBatch, structure: str | None = None) -> Graph:
        structure = structure or self.config.structure
        # The decoder child order only matters where a decoder runs; evaluation graphs keep it too.
        return build_graph(induction, packed.tokens_on_host(), structure, self.recipe.decoder_child_order,
                           self.scatter)

    # ------------------------------------------------------------------------------------------ message passing
    def propagate(self, graph: Graph, dropout: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable up and down passes over ``graph``; returns (up, down), each (n_nodes, E) in node order."""
        if dropout is None:
            dropout = self.training
        if self.propagation_mode(graph.device) == "handwritten":
            return propagate_handwritten(self, graph, dropout,
                                         triton_levels=self.levels_choice(graph.device).used == "triton")
        p_embedding = self.recipe.embedding_dropout if dropout else 0.0
        p_function = self.recipe.function_dropout if dropout else 0.0
        # Upward masks: the ones the induction used (keyed per node), so the graph trained is the graph induced;
        # fresh ones when the structure was induced without dropout. Downward messages always get fresh masks.
        up_keep = graph.up_keep if dropout else None
        offsets = graph.level_offsets

        def up_dropout(x: torch.Tensor, level: int, p: float) -> torch.Tensor:
            if up_keep is None:
                return fast_dropout(x, p)
            return apply_keep(x, up_keep[offsets[level]:offsets[level + 1]], p)

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
        ups: list[torch.Tensor] = [up_dropout(self.embedding(graph.leaf_tokens), 0, p_embedding)]
        graph.up_route.emit(0, ups[0], pending_up)
        for level in range(1, n_levels):
            children = graph.up_route.in_slot_order(level, pending_up)
            pending_up[level] = []
            up = up_dropout(functions.compose(children.view(-1, 2, size)), level, p_function)
            ups.append(up)
            graph.up_route.emit(level, up, pending_up)
        # Down pass, top level first. A node with several parents (entangled: the same constituent in several
        # contexts) receives one message per (parent, side); their mean is its resolved downward embedding
        # (Banyan §3.1). A sentence root with no parent takes its own upward embedding (a root that is also a
        # constituent of another sentence takes its parents' messages only, as the Banyan code; trees.build_graph).
        downs: list[torch.Tensor] = [None] * n_levels  # type: ignore[list-item]
        for level in reversed(range(n_levels)):
            start, stop = graph.level_offsets[level], graph.level_offsets[level + 1]
            total = graph.down_route.summed(level, pending_down, stop - start)
            pending_down[level] = []
            if total is None:
                total = ups[level].new_zeros(stop - start, size)
            total = graph.add_roots(level, total, ups[level])
            down = total / graph.down_count[start:stop].to(total.dtype).unsqueeze(1)
            downs[level] = down
            if level > 0:
                out = function_dropout(functions.decompose(down))
                graph.down_route.emit(level, out.reshape(-1, size), pending_down)
        return torch.cat(ups), torch.cat(downs)

    def run_pass(self, ids: torch.Tensor, lengths: torch.Tensor, again: Pass | None = None) -> Pass:
        """One up-and-down pass over a padded batch. ``again``: an earlier pass over the same batch, whose trees are
        reused unless this step induces with dropout (then each pass induces its own)."""
        if again is not None and again.graph.induction_dropout is None:
            induction, graph = again.induction, again.graph
        else:
            packed, induction = self.induce(ids, lengths, self.config.structure)
            graph = self.build(induction, packed, self.config.structure)
        up, down = self.propagate(graph)
        return Pass(induction, graph, up, down)

    # ----------------------------------------------------------------------------------------------- public API
    def loss(self, ids: torch.Tensor, lengths: torch.Tensor,
             read_back: bool = True) -> tuple[torch.Tensor, dict[str, float | torch.Tensor]]:
        """The objective's loss on a padded batch, and its metrics (``strae.objectives``). ``read_back=False``:
        device-computed metrics (the loss, the objective's terms) stay detached 0-dim tensors, so the forward does
        not wait for the GPU (training_step reads them after launching backward: on a host-bound GPU step the
        host then queues the backward while the objective's products run)."""
        # Structure is induced without gradients; only the message passing is differentiated, as in the
        # reference models (the merge order is a discrete choice with no gradient anyway).
        first = self.run_pass(ids, lengths)
        passes = Passes(first, again=lambda: self.run_pass(ids, lengths, again=first), dembedding=self.dembedding)
        loss, terms = self.objective.loss(passes)
        metrics = {"loss": loss.detach(), "n_nodes": float(first.graph.n_nodes),
                   "n_tokens": float(first.induction.n_leaves), "n_sentences": float(ids.shape[0]), **terms}
        if read_back:
            metrics = {key: float(value) for key, value in metrics.items()}
        return loss, metrics

    @torch.no_grad()
    def encode(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, E) root upward embeddings (dropout-free; the induction already computed them)."""
        _, induction = self.induce(ids, lengths, dropout=False)
        return induction.up[induction.roots]

    @torch.no_grad()
    def node_counts(self, ids: torch.Tensor, lengths: torch.Tensor) -> dict[str, int]:
        """Total nodes (leaves included) of the batch's trees as sentential trees and as one entangled graph."""
        packed, induction = self.induce(ids, lengths, dropout=False)
        entangled = build_graph(induction, packed.tokens_on_host(), "entangled")
        return {"sentential": int(induction.up.shape[0]), "entangled": int(entangled.n_nodes)}

    @torch.no_grad()
    def up_down(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Dropout-free (up, down) embeddings of every node of the configured structure; row i of both is node i."""
        packed, induction = self.induce(ids, lengths, dropout=False)
        return self.propagate(self.build(induction, packed), dropout=False)
