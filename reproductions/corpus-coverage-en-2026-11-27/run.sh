#!/usr/bin/env bash
# How often each English training corpus uses the word tasks' vocabulary (`strae coverage`): the reference
# repositories' shipped samples of the authors' corpus against the corpus strae trains on from the mirror.
# Run from the repository root after the workflow's corpus rule (resources/corpora/en/{train,dev}.txt exist).
set -euo pipefail
out=${1:-reproductions/corpus-coverage-en-2026-11-27}
samples=$(mktemp -d); trap 'rm -rf "$samples"' EXIT
# exlab-research/Banyan @ 7c2cd93 and mopper97/Self-StrAE @ 5aace3f ship the same data/small_train.txt (md5
# 80a8272e29671eb495454c6cc32b11d4); Self-StrAE also ships data/small_dev.txt (its first three lines are toy sentences)
curl -fsSL -o "$samples/small_train.txt" \
  https://raw.githubusercontent.com/exlab-research/Banyan/7c2cd9350b97fa5df61989594a1b8d21e321df78/data/small_train.txt
curl -fsSL -o "$samples/small_dev.txt" \
  https://raw.githubusercontent.com/mopper97/Self-StrAE/5aace3f571f3e7a3f41b47bd45c63b5bef8b1976/data/small_dev.txt
strae coverage --lang en \
  --corpus "$samples/small_train.txt" "$samples/small_dev.txt" resources/corpora/en/train.txt resources/corpora/en/dev.txt \
  --label "authors' sample: small_train.txt" "authors' sample: small_dev.txt" "strae train (mirror Wikipedia 2015)" \
          "strae dev (WikiText-103 valid)" \
  --union wordsim353=wordsim_sim,wordsim_rel --out "$out/coverage.json" | tee "$out/coverage.md"
