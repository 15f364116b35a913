"""Contrastive multi-view sentence embeddings (the third paper): a BiLSTM view vs a dependency Child-Sum
Tree-LSTM view of neighbouring sentences, trained Quick-Thoughts style, plus the Contrastive LSTM comparison model.

Modules: ``parse`` (``strae parse-corpus``: spaCy dependency parses, cached shards), ``model`` (the two views,
batched level-by-level Tree-LSTM, the contrastive loss), ``data`` (vocabulary, consecutive-sentence batches),
``train`` (``strae train-multiview``), ``encoder`` (``load_run`` for ``strae evaluate``).
"""

# the paper's sizes (§4.2): `strae train-multiview`'s defaults, and what a config's `multiview.train` leaves unset
DEFAULT_HIDDEN = 1000
DEFAULT_EMBEDDING_DIM = 300


def default_setting(model: str, hidden: int = DEFAULT_HIDDEN, embedding_dim: int = DEFAULT_EMBEDDING_DIM) -> str:
    """The run setting `strae train-multiview` names a run by (the model and its sizes): the paper's CTL is
    ``ctl_h1000_e300``."""
    return f"{model}_h{hidden}_e{embedding_dim}"


def config_settings(config: dict) -> dict[str, str]:
    """``{"multiview_<model>": setting}`` of every model a config's enabled ``multiview:`` block trains (the
    workflow's run directories; a table row of such a model reads this setting, config/quick.yaml's smaller models
    included)."""
    block = config.get("multiview") or {}
    if not block.get("enabled", False):
        return {}
    train = block.get("train") or {}
    return {f"multiview_{model}": default_setting(model, train.get("hidden", DEFAULT_HIDDEN),
                                                  train.get("embedding_dim", DEFAULT_EMBEDDING_DIM))
            for model in block.get("models", [])}
