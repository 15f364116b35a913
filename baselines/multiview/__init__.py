"""Contrastive multi-view sentence embeddings (the third paper): a BiLSTM view vs a dependency Child-Sum
Tree-LSTM view of neighbouring sentences, trained Quick-Thoughts style, plus the Contrastive LSTM comparison model.

Modules: ``parse`` (``strae parse-corpus``: spaCy dependency parses, cached shards), ``model`` (the two views,
batched level-by-level Tree-LSTM, the contrastive loss), ``data`` (vocabulary, consecutive-sentence batches),
``train`` (``strae train-multiview``), ``encoder`` (``load_run`` for ``strae evaluate``).
"""

# the paper's sizes (§4.2): `strae train-multiview`'s defaults, and what a config's `multiview.train` leaves unset
DEFAULT_HIDDEN = 1000
DEFAULT_EMBEDDING_DIM = 300
# a sentence's own other view in the objective: excluded (the default, §3.2's Quick-Thoughts objective) or positive
OWN_VIEW = ("excluded", "positive")
# the random-token floor's width when `multiview.senteval.random_token` is `true`: the encoder's default (the first
# records' floor); `model` in a list of widths = the models' test vector, [target; context]
from strae.evaluate.random_token import DEFAULT_DIM as FLOOR_DIM  # noqa: E402

FLOOR_MODEL_WIDTH = "model"


def default_setting(model: str, hidden: int = DEFAULT_HIDDEN, embedding_dim: int = DEFAULT_EMBEDDING_DIM,
                    epochs: int = 1, own_view: str = "excluded") -> str:
    """The run setting `strae train-multiview` names a run by (the model, its sizes, its passes over the corpus
    when more than the paper's one, and ``_ownview`` when a sentence's own other view is a positive): the paper's CTL
    is ``ctl_h1000_e300``, four passes ``ctl_h1000_e300_ep4``."""
    return (f"{model}_h{hidden}_e{embedding_dim}" + (f"_ep{epochs}" if epochs != 1 else "")
            + ("_ownview" if own_view == "positive" else ""))


def config_settings(config: dict) -> dict[str, str]:
    """``{"multiview_<model>": setting}`` of every model a config's enabled ``multiview:`` block trains (the
    workflow's run directories; a table row of such a model reads this setting, config/quick.yaml's smaller models
    included)."""
    block = config.get("multiview") or {}
    if not block.get("enabled", False):
        return {}
    train = block.get("train") or {}
    return {f"multiview_{model}": default_setting(model, train.get("hidden", DEFAULT_HIDDEN),
                                                  train.get("embedding_dim", DEFAULT_EMBEDDING_DIM),
                                                  train.get("epochs") or 1, train.get("own_view", "excluded"))
            for model in block.get("models", [])}


def floor_dims(config: dict) -> list[int]:
    """The widths of the random-token floors a config scores beside its multi-view runs, in its order
    (``multiview.senteval.random_token``): ``true`` = [256], ``false`` = [], a list = those widths, ``model`` being the
    models' test vector (2 x ``multiview.train.hidden``: the paper's 2,000; a probe's accuracy grows with the width of
    even random features, so the floor a 2,000-d model should clear is the 2,000-d one)."""
    block = config.get("multiview") or {}
    chosen = (block.get("senteval") or {}).get("random_token", True)
    if chosen is True:
        return [FLOOR_DIM]
    if not chosen:
        return []
    width = 2 * int((block.get("train") or {}).get("hidden", DEFAULT_HIDDEN))
    return list(dict.fromkeys(width if dim == FLOOR_MODEL_WIDTH else int(dim) for dim in chosen))
