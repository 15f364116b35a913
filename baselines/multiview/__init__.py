"""Contrastive multi-view sentence embeddings (the third paper): a BiLSTM view vs a dependency Child-Sum
Tree-LSTM view of neighbouring sentences, trained Quick-Thoughts style, plus the Contrastive LSTM comparison model.

Modules: ``parse`` (``strae parse-corpus``: spaCy dependency parses, cached shards), ``model`` (the two views,
batched level-by-level Tree-LSTM, the contrastive loss), ``data`` (vocabulary, consecutive-sentence batches),
``train`` (``strae train-multiview``), ``encoder`` (``load_run`` for ``strae evaluate``).
"""
