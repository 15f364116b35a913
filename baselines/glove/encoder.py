"""GloVe run directory -> ``strae.encode.Encoder``.

Sentence = mean of its word vectors; word = its vector (``words`` runs) or the mean of its pieces'
vectors (``subword`` runs). Tokens without a vector are skipped; an input with no known token at all
gets a NaN row (the harness counts and drops it). ``stopwords=remove`` drops stop-words before
averaging (Reimers & Gurevych 2019's "GloVe + stop-word removal" baseline). ``stopword_list`` picks the list:
``iso`` (default) the ``stopwordsiso`` list of the run's language (``stopwords_language`` in encoder.json, overridable
as an option); ``sklearn`` scikit-learn's English list (318 words), the word part of the list sentence-transformers
(Reimers & Gurevych's library) removes for averaged word embeddings — the one config/config.yaml's ``stopword_rm``
evaluation uses, as it matches Banyan Table 3's row more closely (reproductions/glove-en-cpu-2026-11-24).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines.glove.cooccurrence import words_of
from strae.encode import Encoder
from strae.io import read_json, sha256_file
from strae.runs import RunRecord

STOPWORD_MODES = ("keep", "remove")
STOPWORD_LISTS = ("iso", "sklearn")


# scikit-learn's list is one language's: a language whose stopwordsiso list holds less than this share of its words
# is another language (its own list holds all of them; the next closest list, 6 %)
_SKLEARN_LIST_SHARE = 0.5


def _sklearn_stop_words() -> frozenset[str]:
    """scikit-learn's stop-word list, read from its module file: importing sklearn.feature_extraction takes seconds
    (scipy and the text vectorisers), and the workflow checks the list at DAG time."""
    import importlib.util

    found = importlib.util.find_spec("sklearn")
    path = Path(found.submodule_search_locations[0]) / "feature_extraction" / "_stop_words.py" if found else None
    if path is None or not path.exists():  # another layout: the public import
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as words
    else:
        spec = importlib.util.spec_from_file_location("_strae_sklearn_stop_words", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        words = module.ENGLISH_STOP_WORDS
    return frozenset(word.lower() for word in words)


def stopword_list_error(language: str, source: str = "iso") -> str | None:
    """Why list ``source`` cannot serve stop-word code ``language`` (None when it can): ``iso`` needs stopwordsiso
    to have the code; ``sklearn`` is one language's list, so the code's stopwordsiso list must hold most of its words
    (without naming a language here: the lists themselves say whose it is)."""
    if source not in STOPWORD_LISTS:
        return f"stopword_list={source}: expected one of {STOPWORD_LISTS}"
    import stopwordsiso

    if source == "sklearn" and not stopwordsiso.has_lang(language):
        return None  # no list of the code's to compare with (a block key that is no language code): not refused
    if not stopwordsiso.has_lang(language):
        return (f"stopwordsiso has no stop-word list for {language!r} (set languages.<lang>.stopwords_language, or "
                f"--encoder-option stopwords_language=CODE, to a stopwordsiso code)")
    if source == "sklearn":
        words = _sklearn_stop_words()
        share = len(words & {w.lower() for w in stopwordsiso.stopwords(language)}) / len(words)
        if share < _SKLEARN_LIST_SHARE:
            return (f"stopword_list=sklearn is scikit-learn's list of another language's stop-words (stopwordsiso's "
                    f"{language!r} list holds {share:.0%} of them): use stopword_list=iso, {language!r}'s own list")
    return None


def stopword_set(language: str, source: str = "iso") -> frozenset[str]:
    """A stop-word list, lowercased: ``iso`` the maintained per-language list (stopwords-iso) of ``language``;
    ``sklearn`` scikit-learn's list (English: refused for another ``language``, :func:`stopword_list_error`).
    sentence-transformers' list is scikit-learn's plus 34 contraction fragments and
    punctuation; its whitespace tokenizer never embeds punctuation, whereas GloVe here has vectors for the
    punctuation tokens its word tokenizer splits off, so punctuation stays (removing it too moves most STS sets far
    above the paper's row: README of reproductions/glove-en-cpu-2026-11-24)."""
    error = stopword_list_error(language, source)
    if error:
        raise SystemExit(f"--encoder-option stopwords=remove, stopwords_language={language!r}: {error}")
    if source == "sklearn":
        return _sklearn_stop_words()
    import stopwordsiso

    return frozenset(word.lower() for word in stopwordsiso.stopwords(language))


class GloveEncoder(Encoder):
    def __init__(
        self,
        vectors,  # gensim KeyedVectors
        tokenization: str = "words",
        tokenizer=None,  # strae Tokenizer (subword runs)
        stopwords: frozenset[str] | None = None,
        info: dict[str, Any] | None = None,
        stopword_list: str = "iso",
        pretokenize: str = "none",
        trained_with: str = "none",
    ):
        self.vectors = vectors
        self.tokenization = tokenization
        self.tokenizer = tokenizer
        self.stopwords = stopwords
        self.stopword_list = stopword_list
        # words mode: how text is split before word_tokenize (the run's training setting unless an encoder option
        # says otherwise) and whether PTB clitics stay whole (as the run trained: `trained_with`)
        self.pretokenize, self.trained_with = pretokenize, trained_with
        self.info = dict(info or {})
        base = self.info.get("encoder_id", "glove")
        self.encoder_id = base + ("@stopword_rm" if stopwords is not None else "")
        self.dim = int(vectors.vector_size)

    # -- tokens -------------------------------------------------------------------------------
    def _words(self, text: str) -> list[str]:
        if self.tokenization == "words":
            words = words_of(text, self.pretokenize, self.trained_with)
        else:
            words = self.tokenizer.normalize(text).split()
        if self.stopwords is not None:
            words = [w for w in words if w not in self.stopwords]
        return words

    def _word_vector(self, word: str) -> np.ndarray | None:
        """A word's vector, or None when it has none. Multi-token words average their known tokens. Subword mode:
        ``word`` is already normalised (pretokenised with its sentence by ``_words``, or as a whole by
        ``encode_words``), so its pieces are taken as it stands."""
        if self.tokenization == "words":
            if word in self.vectors.key_to_index:
                return self.vectors[word]
            tokens = words_of(word, self.pretokenize, self.trained_with)
        else:
            tokens = self.tokenizer.encode_as_pieces(word, normalized=True)
        known = [self.vectors[t] for t in tokens if t in self.vectors.key_to_index]
        return np.mean(known, axis=0) if known else None

    def _mean(self, vectors: list[np.ndarray]) -> np.ndarray:
        if not vectors:
            return np.full(self.dim, np.nan, dtype=np.float32)
        return np.mean(np.stack(vectors), axis=0).astype(np.float32)

    # -- Encoder interface ----------------------------------------------------------------------
    def encode_sentences(self, sentences: Sequence[str], batch_size: int = 256) -> np.ndarray:
        out = np.empty((len(sentences), self.dim), dtype=np.float32)
        for i, sentence in enumerate(sentences):
            word_vectors = [v for v in (self._word_vector(w) for w in self._words(sentence)) if v is not None]
            out[i] = self._mean(word_vectors)
        return out

    def encode_words(self, words: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        out = np.empty((len(words), self.dim), dtype=np.float32)
        for i, word in enumerate(words):
            text = word.lower() if self.tokenization == "words" else self.tokenizer.normalize(word)
            vector = self._word_vector(text.strip())
            out[i] = vector if vector is not None else np.nan
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "encoder_id": self.encoder_id, "kind": "glove", "tokenization": self.tokenization,
            "pretokenize": self.pretokenize, "trained_with_pretokenize": self.trained_with,
            "vocab_size": len(self.vectors.key_to_index), "dim": self.dim,
            "stopwords": "remove" if self.stopwords is not None else "keep",
            "stopword_list": self._stopword_list_name(),
            "n_stopwords": len(self.stopwords) if self.stopwords is not None else 0,
            "device": "cpu (numpy)",
            # how a vector is formed, as the RoBERTa and strae encoders record theirs
            "sentence_pooling": "mean of the sentence's words' vectors (stop words first removed where asked); "
                                "a word without a vector is left out, a sentence with none has no vector (NaN)",
            "word_vector": "the word's row; else the mean of its known tokens' (pieces') rows; else none (NaN: the "
                           "pair is out of vocabulary)",
            **{k: v for k, v in self.info.items() if k not in {"encoder_id"}},
        }

    def _stopword_list_name(self) -> str | None:
        if self.stopwords is None:
            return None
        if self.stopword_list == "sklearn":
            import sklearn

            return f"sklearn {sklearn.__version__}"
        return f"stopwordsiso:{self.info.get('stopwords_language')}"

    def run_info(self) -> dict[str, Any]:
        # the labels come from encoder.json (the same as train.json's), the status from train.json
        labels = {key: self.info.get(key) for key in ("language", "setting", "seed")}
        record = RunRecord.from_dict({"run": {**labels, "model": "glove"}, **self.info.get("train", {})})
        # the run's own labels: stop-word removal is the evaluation's setting (its label, e.g. the config's
        # `stopword_rm`, makes the table row SETTING@LABEL), not part of the run's
        return record.run_info()


def load_run(run_dir: str | Path, stopwords: str = "keep", stopwords_language: str | None = None,
             stopword_list: str = "iso", device: str = "cpu", pretokenize: str | None = None) -> GloveEncoder:
    """Loader of kind ``glove`` (``strae.encode.ENCODERS``).

    ``device`` is accepted so that ``strae evaluate --device`` (and the workflow, which passes the scale's device)
    works for every encoder; static vectors are averaged with numpy, which the result's provenance says."""
    from gensim.models import KeyedVectors

    run_dir = Path(run_dir)
    if stopwords not in STOPWORD_MODES:
        raise SystemExit(f"--encoder-option stopwords={stopwords}: expected one of {STOPWORD_MODES}")
    if stopword_list not in STOPWORD_LISTS:
        raise SystemExit(f"--encoder-option stopword_list={stopword_list}: expected one of {STOPWORD_LISTS}")
    manifest = read_json(run_dir / "encoder.json")
    vectors_path = run_dir / manifest.get("vectors", "vectors.bin")
    if not vectors_path.exists():
        raise SystemExit(f"{vectors_path}: missing; the run directory is incomplete (re-run strae train-glove)")
    try:
        vectors = KeyedVectors.load_word2vec_format(str(vectors_path), binary=True)
    except (ValueError, EOFError, UnicodeDecodeError, OSError) as error:
        raise SystemExit(f"{vectors_path}: cannot load ({error}); re-run strae train-glove") from error
    from strae.data.pretokenize import check_kind

    trained_with = check_kind(manifest.get("pretokenize") or "none", f"{run_dir / 'encoder.json'}: pretokenize")
    chosen = check_kind(pretokenize, "--encoder-option pretokenize") if pretokenize else trained_with
    tokenizer = None
    if manifest.get("tokenization") == "subword":
        from strae.data.tokenizer import load_tokenizer

        # the pieces were learnt from text so pretokenised (a --data-dir run: its tokenised corpus' pretokeniser)
        tokenizer = load_tokenizer(run_dir / manifest.get("tokenizer", "tokenizer.model"), pretokenize=chosen)
    language = stopwords_language or manifest.get("stopwords_language") or manifest.get("language")
    train = RunRecord.from_disk(run_dir)  # None for a run directory copied without its train.json
    info = {
        "encoder_id": f"glove/{manifest.get('setting')}/seed{manifest.get('seed')}",
        "run_dir": str(run_dir), "vectors_sha256": sha256_file(vectors_path),
        "language": manifest.get("language"), "setting": manifest.get("setting"), "seed": manifest.get("seed"),
        "corpus": manifest.get("corpus_label"), "stopwords_language": language,
        "train": {"status": train.status if train else None, "failure_reason": train.failure_reason if train else None},
    }
    stop = stopword_set(language, stopword_list) if stopwords == "remove" else None
    return GloveEncoder(vectors, manifest.get("tokenization", "words"), tokenizer, stop, info, stopword_list,
                        chosen, trained_with)
