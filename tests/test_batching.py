"""strae.data.batching: the one epoch order, batch split and padding every trainer uses."""
from __future__ import annotations

import numpy as np
import torch

from strae.data.batching import batch_at_step, batch_indices, collate, epoch_order, pad_batch


def test_epoch_order_is_a_function_of_seed_and_epoch():
    a = epoch_order(100, seed=1, epoch=0)
    assert sorted(a.tolist()) == list(range(100))
    assert np.array_equal(a, epoch_order(100, seed=1, epoch=0))
    assert not np.array_equal(a, epoch_order(100, seed=1, epoch=1))
    assert not np.array_equal(a, epoch_order(100, seed=2, epoch=0))
    batches = batch_indices(a, 32)
    assert [len(b) for b in batches] == [32, 32, 32, 4]


def test_the_trainers_draw_the_batches_they_drew_before():
    """Each trainer used to draw its own order; the shared helpers must give exactly those batches (same RNG use),
    or resumed and re-run experiments would train on other batches."""
    for seed, epoch, n, size in ((0, 0, 97, 16), (3, 2, 100, 32), (11, 5, 40, 40)):
        # strae train and GloVe: numpy's default_rng([seed, epoch]) permutation, consecutive slices
        permutation = np.random.default_rng([seed, epoch]).permutation(n)
        assert np.array_equal(epoch_order(n, seed, epoch), permutation)
        glove = torch.from_numpy(permutation)
        assert all(torch.equal(torch.from_numpy(batch), glove[i * size:(i + 1) * size])
                   for i, batch in enumerate(batch_indices(epoch_order(n, seed, epoch), size)))
    # RoBERTa / SimCSE: step-indexed batches, epochs wrap, ragged tail dropped
    for step in range(9):
        epoch, within = divmod(step, 100 // 32)
        before = np.random.default_rng([3, epoch]).permutation(100)[within * 32:(within + 1) * 32]
        assert np.array_equal(batch_at_step(100, 32, seed=3, step=step), before)
    epoch0 = np.concatenate([batch_at_step(100, 32, seed=3, step=s) for s in range(3)])
    assert len(set(epoch0.tolist())) == 96  # an epoch visits distinct sentences


def test_pad_batch_and_collate_pad_with_pad_id():
    class Corpus:
        sentences = [np.array([1, 2, 3, 4], dtype=np.int32), np.array([5, 6], dtype=np.int32)]

        def __getitem__(self, i):
            return self.sentences[i]

    ids, lengths = collate(Corpus(), np.array([1, 0]), pad_id=9)
    assert ids.dtype == torch.long and ids.tolist() == [[5, 6, 9, 9], [1, 2, 3, 4]]
    assert lengths.dtype == torch.long and lengths.tolist() == [2, 4]
    ids, lengths = pad_batch([[7], [], [1, 2, 3]], pad_id=0)  # python lists, an empty row
    assert ids.tolist() == [[7, 0, 0], [0, 0, 0], [1, 2, 3]] and lengths.tolist() == [1, 0, 3]


def test_collate_gathers_a_flat_corpus_as_the_row_by_row_padding(tmp_path):
    """TokenizedCorpus (one flat ids array + offsets, memory-mapped) takes the vectorised gather: the same tensors
    as padding its sentences one by one, for random batches, repeated and empty sentences and a one-row batch."""
    import pytest

    from strae.data.tokenized import TokenizedCorpus

    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 40, size=300)
    lengths[[3, 17]] = 0
    ids = rng.integers(0, 1000, size=int(lengths.sum())).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    np.save(tmp_path / "train.ids.npy", ids)
    np.save(tmp_path / "train.offsets.npy", offsets)
    (tmp_path / "train.json").write_text(
        f'{{"vocab_size": 1000, "pad_id": 1000, "n_sentences": 300, "n_tokens": {int(lengths.sum())}}}')
    corpus = TokenizedCorpus(tmp_path, "train")
    assert isinstance(corpus.ids, np.ndarray) and isinstance(corpus.offsets, np.ndarray)  # the fast path applies
    for indices in [rng.permutation(300)[:64], np.array([3, 17, 3]), np.array([299]), rng.integers(0, 300, 128)]:
        expected = pad_batch([corpus[int(i)] for i in indices], 1000)
        got = collate(corpus, indices, 1000)
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
        assert got[0].dtype == torch.long and got[1].dtype == torch.long
    with pytest.raises(IndexError):
        collate(corpus, np.array([0, 300]), 1000)


def test_batch_at_step_keeps_its_epoch_order_without_sharing_it():
    """The epoch's permutation is computed once per epoch (cached); a caller that modifies its batch must not
    change the next step's batches."""
    first = batch_at_step(100, 32, seed=5, step=1)
    first[:] = -1
    again = batch_at_step(100, 32, seed=5, step=1)
    assert np.array_equal(again, epoch_order(100, 5, 0)[32:64])
    for step in range(12):  # across epoch boundaries (3 steps per epoch) and back
        epoch, within = divmod(step, 3)
        assert np.array_equal(batch_at_step(100, 32, seed=5, step=step),
                              epoch_order(100, 5, epoch)[within * 32:(within + 1) * 32])
    assert np.array_equal(batch_at_step(100, 32, seed=5, step=0), epoch_order(100, 5, 0)[:32])
