"""Generate the synthetic language used by the end-to-end test (deterministic; outputs are committed).

A toy language with made-up words: nouns and verbs come in semantic classes, and sentences pair a class's nouns with
that class's verbs, so distributional similarity is learnable from a few thousand lines. Gold similarity of a word
pair is high within a class and low across classes; of a sentence pair, the number of classes the two share.
Run: python .test/make_synthetic.py  (writes .test/synth/{corpus.txt,words.tsv,sentences_semrel.csv,sentences_sts.tsv}:
the evaluation files in published layouts - word_pairs, semrel2024, sts_tsv - as a new language's would be)
"""
from __future__ import annotations

import csv
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "synth"
SYLLABLES = ["ka", "lo", "mi", "tu", "re", "sa", "no", "vi", "pe", "zu", "ra", "do", "fi", "gu", "be", "xo"]


def word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables))


def main(n_sentences: int = 3000, n_classes: int = 6, seed: int = 7) -> None:
    rng = random.Random(seed)
    classes = [
        {"nouns": [word(rng, 2) for _ in range(6)], "verbs": [word(rng, 3) for _ in range(3)]}
        for _ in range(n_classes)
    ]
    function_words = ["el", "na", "ti", "o"]
    sentences, sentence_classes = [], []
    for _ in range(n_sentences):
        first, second = rng.randrange(n_classes), rng.randrange(n_classes)
        tokens = [rng.choice(function_words), rng.choice(classes[first]["nouns"]),
                  rng.choice(classes[first]["verbs"]), rng.choice(function_words),
                  rng.choice(classes[first]["nouns"])]
        if rng.random() < 0.5:
            tokens += [rng.choice(function_words), rng.choice(classes[second]["nouns"]),
                       rng.choice(classes[second]["verbs"])]
        sentences.append(" ".join(tokens))
        sentence_classes.append({first, second} if len(tokens) > 5 else {first})
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "corpus.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    # word pairs as a tab-separated list without a header (format word_pairs)
    with open(OUT / "words.tsv", "w", newline="", encoding="utf-8") as handle:
        for _ in range(200):
            a, b = rng.randrange(n_classes), rng.randrange(n_classes)
            kind = rng.choice(["nouns", "verbs"])
            w1, w2 = rng.choice(classes[a][kind]), rng.choice(classes[b][kind])
            handle.write(f"{w1}\t{w2}\t{round((8.0 if a == b else 1.0) + rng.random(), 2)}\n")

    def sentence_pair() -> tuple[str, str, float]:
        i, j = rng.randrange(n_sentences), rng.randrange(n_sentences)
        shared = len(sentence_classes[i] & sentence_classes[j]) / len(sentence_classes[i] | sentence_classes[j])
        return sentences[i], sentences[j], round(min(1.0, shared + 0.1 * rng.random()), 3)

    # sentence pairs in SemRel-2024's published layout (format semrel2024): PairID,Text,Score, the two sentences
    # inside Text separated by a newline, the second with the stray leading space the real files have
    with open(OUT / "sentences_semrel.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["PairID", "Text", "Score"])
        for index in range(200):
            first, second, score = sentence_pair()
            writer.writerow([f"SYN-test-{index + 1:04d}", f"{first}\n {second}", score])
    # more sentence pairs, STS-style: score<TAB>sentence1<TAB>sentence2 (format sts_tsv)
    with open(OUT / "sentences_sts.tsv", "w", newline="", encoding="utf-8") as handle:
        for _ in range(200):
            first, second, score = sentence_pair()
            handle.write(f"{score * 5:.3f}\t{first}\t{second}\n")


if __name__ == "__main__":
    main()
