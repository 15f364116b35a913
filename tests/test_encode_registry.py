"""strae.encode: one Encoder protocol, one registry of encoder kinds (ENCODERS), used by every trainer and loader."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from strae.encode import ENCODERS, Encoder, EncoderKind, load_encoder, write_encoder_manifest
from strae.io import write_json

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_every_kind_a_trainer_writes_is_registered_and_nothing_else():
    """The kinds in encoder.json files (write_encoder_manifest calls) are exactly the registry's run-dir kinds."""
    written = set()
    for path in [*(REPO_ROOT / "src").rglob("*.py"), *(REPO_ROOT / "baselines").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        written |= set(re.findall(r'write_encoder_manifest\(\s*\w+,\s*"([\w-]+)"', text))
    assert written == {kind for kind, entry in ENCODERS.items() if not entry.builtin}


def test_every_encoder_class_implements_the_protocol():
    from baselines.glove.encoder import GloveEncoder
    from baselines.multiview.encoder import MultiviewEncoder
    from baselines.roberta.encoder import RobertaEncoder
    from strae.evaluate.random_token import RandomTokenEncoder
    from strae.models.encoder import StraeEncoder

    for cls in (StraeEncoder, GloveEncoder, RobertaEncoder, MultiviewEncoder, RandomTokenEncoder):
        assert Encoder in cls.__mro__, cls  # explicit subclasses: they inherit describe() and run_info() defaults


def test_builtin_loads_by_name_and_is_an_encoder():
    encoder = load_encoder("random-token", dim=8, seed=3)
    assert isinstance(encoder, Encoder) and encoder.encode_sentences(["a b"]).shape == (1, 8)


def test_manifest_kinds_are_checked(tmp_path):
    with pytest.raises(ValueError, match="unknown encoder kind 'random-token'"):
        write_encoder_manifest(tmp_path, "random-token")  # a builtin has no run directory
    write_json(tmp_path / "encoder.json", {"kind": "nonesuch"})
    with pytest.raises(SystemExit, match=r"encoder\.json: unknown encoder kind 'nonesuch'"):
        load_encoder(str(tmp_path))
    with pytest.raises(SystemExit, match="not a builtin encoder"):
        load_encoder(str(tmp_path / "missing"))


def test_a_structural_encoder_is_accepted_and_anything_else_refused(monkeypatch, tmp_path):
    class Duck:  # no subclassing: the protocol is structural
        encoder_id = "duck"

        def encode_sentences(self, sentences, batch_size=256):
            return np.zeros((len(sentences), 2), dtype=np.float32)

        encode_words = encode_sentences

        def describe(self):
            return {"encoder_id": self.encoder_id}

        def run_info(self):
            return {}

    monkeypatch.setitem(ENCODERS, "duck", EncoderKind(lambda **_: Duck(), builtin=True))
    assert load_encoder("duck").encoder_id == "duck"
    monkeypatch.setitem(ENCODERS, "broken", EncoderKind(lambda **_: object(), builtin=True))
    with pytest.raises(TypeError, match="broken: the loader returned object, not an Encoder"):
        load_encoder("broken")


def test_a_misspelt_or_malformed_encoder_option_is_refused_for_every_kind(tmp_path):
    """`--encoder-option sed=3` used to run seed 0 while the evaluation's label said `sed-3`: every kind's options
    are listed with it and anything else is refused, naming the known ones; a value that is not a number is named."""
    from strae.encode import ENCODERS

    assert all(entry.options is not None for entry in ENCODERS.values())
    with pytest.raises(SystemExit, match="--encoder-option sed: unknown for random-token encoders; known: device, "
                                         "seed, dim"):
        load_encoder("random-token", sed=3)
    with pytest.raises(SystemExit, match="--encoder-option dim=abc: not an integer"):
        load_encoder("random-token", dim="abc")
    assert load_encoder("random-token", seed="3", device="cpu").seed == 3
    run = tmp_path / "run"
    run.mkdir()
    (run / "encoder.json").write_text('{"kind": "multiview"}')
    with pytest.raises(SystemExit, match="--encoder-option devcie: unknown for multiview encoders"):
        load_encoder(str(run), devcie="cpu")


def test_damaged_weights_and_tokenizers_are_named_for_every_kind(tmp_path):
    """A truncated model.pt (strae, multi-view, RoBERTa runs), GloVe vectors or a tokenizer file that is not a
    SentencePiece model stop with the file named, not a torch/gensim/sentencepiece traceback."""
    from strae.data.tokenizer import load_tokenizer
    from strae.runs import load_weights_file

    bad = tmp_path / "model.pt"
    bad.write_bytes(b"PK\x03\x04 truncated")
    for weights_only in (True, False):
        with pytest.raises(SystemExit, match=r"model.pt: cannot load .*train the run again"):
            load_weights_file(bad, weights_only=weights_only)
    not_a_model = tmp_path / "en.json"
    not_a_model.write_text("{}")
    with pytest.raises(SystemExit, match="en.json: not a SentencePiece model"):
        load_tokenizer(not_a_model)
