"""GloVe baseline (Banyan paper, Tables 3-4): co-occurrence counting, the GloVe objective in PyTorch,
gensim KeyedVectors on disk, and an Encoder (mean of word vectors, optional stop-word removal).

Modules: ``cooccurrence`` (tokenisation + streaming counts), ``model`` (objective + row-wise optimisers),
``train`` (``strae train-glove``), ``encoder`` (``load_run`` for ``strae evaluate``).
"""
