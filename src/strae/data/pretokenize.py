"""Word-level pretokenisation applied before sentence-piece encoding (``languages.<lang>.pretokenize``).

The reference code trained on text that was already word-tokenised Penn-Treebank/CoreNLP style (the authors'
English corpus, e.g. exlab-research/Banyan ``data/small_train.txt``: ``Pennsylvania 's all - state``,
``-LRB- ECN -RRB-``, ``could n't``, straight ``"`` quotes, original casing). Raw text gives BPEmb fewer pieces per
sentence than the papers report (~31), so the setting is part of reproducing their corpus, not a cosmetic choice.

Kinds (one name per recipe; every prepared corpus and trained run records the name it used):

- ``none``: the text is left as it is.
- ``treebank``: nltk's ``TreebankWordTokenizer`` with ``convert_parentheses=True`` (``(`` -> ``-LRB-``, ``)`` ->
  ``-RRB-``); its LaTeX quotes (`````` / ``''``) mapped back to ``"`` and its square/curly bracket escapes back to
  the brackets, as in the reference corpus; then hyphens between word characters split as `` - `` except in the
  hyphenated words CoreNLP's PTBLexer keeps whole (its ``HTHINGEXCEPTION*`` rules: prefixes such as ``non-``,
  ``multi-``, ``pre-``, ``e-``, suffixes such as ``-less``, and a few whole words such as ``uh-huh``; the
  reference corpus shows exactly those kept: ``non-profit``, ``pan-Arab``, ``X-Files``, but ``self - made``,
  ``all - state``). Tokens are joined with single spaces.

``treebank`` is meant to be idempotent on text it produced (applying it twice changes nothing), so text that is
already tokenised this way (the reference corpus, the papers' evaluation files) is largely left alone; where it is
not is measured in the README ("Pretokenisation").
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

PRETOKENIZERS = ("none", "treebank")
DEFAULT_PRETOKENIZE = "none"

# CoreNLP PTBLexer.flex (stanfordnlp/CoreNLP, src/edu/stanford/nlp/process/PTBLexer.flex): hyphenated words it does
# not split even with splitHyphenated (the lexer is caseless, so these match any case).
_KEEP_PREFIXES = (
    "e a u x agro ante anti arch be bi bio co counter cross cyber de eco ex extra inter intra macro mega micro mid "
    "mini multi neo non over pan para peri post pre pro pseudo quasi re semi sub super tri ultra un uni vice"
).split()
_KEEP_SUFFIXES = "esque ette fest fold gate itis less most o-torium rama wise".split()
_KEEP_WHOLE = "mm-hm mm-mm o-kay uh-huh uh-oh".split()
_PREFIXED = re.compile(rf"(?i)(?:{'|'.join(_KEEP_PREFIXES)})(?:-[^\W_]+)+")
_SUFFIXED = re.compile(rf"(?i)[^\W_][\w.,]*-(?:{'|'.join(_KEEP_SUFFIXES)})(?:e?[sd])?")
_WHOLE = re.compile(rf"(?i)(?:{'|'.join(_KEEP_WHOLE)})(?:e?[sd])?")
_INNER_HYPHEN = re.compile(r"(?<=\w)-(?=\w)")
# Tokens nltk rewrites that the reference corpus keeps as they are: LaTeX-style quotes (it has plain double quotes)
# and square/curly bracket escapes (it has ``]`` but never ``-RSB-``; only round brackets are escaped).
_RESTORE = {"``": '"', "''": '"', "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}


class PretokenizeError(ValueError):
    """An unknown pretokenize kind; the message names the known ones."""


def check_kind(kind: str | None, where: str = "pretokenize") -> str:
    """``kind`` normalised (None -> ``none``); raises with ``where`` (a config key or option) if unknown."""
    kind = DEFAULT_PRETOKENIZE if kind in (None, "") else str(kind)
    if kind not in PRETOKENIZERS:
        raise PretokenizeError(f"{where}: unknown pretokenize kind {kind!r}; use one of {', '.join(PRETOKENIZERS)}")
    return kind


@lru_cache(maxsize=1)
def _treebank_tokenizer():
    from nltk.tokenize import TreebankWordTokenizer  # rule-based; needs no nltk data download

    return TreebankWordTokenizer()


def _split_hyphens(token: str) -> str:
    if "-" not in token or token.startswith("-") and token.endswith("-") and token[1:-1].isupper():
        return token  # no hyphen, or a bracket escape such as -LRB-
    if _PREFIXED.fullmatch(token) or _SUFFIXED.fullmatch(token) or _WHOLE.fullmatch(token):
        return token
    return _INNER_HYPHEN.sub(" - ", token)


def treebank(text: str) -> str:
    """PTB/CoreNLP-style word tokenisation of one sentence (see the module docstring)."""
    tokens = _treebank_tokenizer().tokenize(text, convert_parentheses=True)
    out = []
    for token in tokens:
        token = _RESTORE.get(token, token)
        out.append(_split_hyphens(token))
    return " ".join(" ".join(out).split())


def _identity(text: str) -> str:
    return text


def get_pretokenizer(kind: str | None) -> Callable[[str], str]:
    """The function for a kind (``none`` -> identity)."""
    kind = check_kind(kind)
    return treebank if kind == "treebank" else _identity


def pretokenize(text: str, kind: str | None) -> str:
    return get_pretokenizer(kind)(text)


def pretokenize_all(texts: Iterable[str], kind: str | None) -> list[str]:
    function = get_pretokenizer(kind)
    return [function(text) for text in texts]
