#!/usr/bin/env python3
"""Writes tests/fixtures/minilm_reference.json: reference all-MiniLM-L6-v2 embeddings of a few
fixed sentences, computed by the Python sentence-transformers package from the same model
directory the Rust `minilm` embedder loads. tests/minilm.rs checks the Rust vectors against it.

Usage (from the repository root; needs the model from scripts/fetch-minilm.sh):

    python3 -m venv .cache/venv-ref
    .cache/venv-ref/bin/pip install sentence-transformers   # pulls torch from PyPI (large)
    .cache/venv-ref/bin/python scripts/make-minilm-reference.py [MODEL_DIR]

The fixture was generated with sentence-transformers (its `generator` field says so). Should
that package be unavailable, the script falls back to transformers + torch with explicit mean
pooling and L2 normalisation, which is the same computation, and records that instead.
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".cache/models/all-MiniLM-L6-v2")
OUT = os.path.join(ROOT, "tests/fixtures/minilm_reference.json")

# Long enough to exceed the model's 256 word-piece limit, so truncation is covered.
LONG = " ".join(
    [
        "The Danube is the second-longest river in Europe, after the Volga in Russia.",
        "It flows through much of Central and Southeastern Europe, from the Black Forest",
        "into the Black Sea, passing through or along ten countries, more than any other",
        "river in the world. Its drainage basin extends into nine more countries.",
    ]
    * 6
)

SENTENCES = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
    "Who designed the tower that was completed in 1889?",
    "Photosynthesis converts light energy into chemical energy in green plants.",
    "Zürich's café served crème brûlée to a naïve visitor from 東京.",
    "a",
    LONG,
]


def with_sentence_transformers():
    from sentence_transformers import SentenceTransformer
    import sentence_transformers

    model = SentenceTransformer(MODEL_DIR, device="cpu")
    vectors = model.encode(SENTENCES, batch_size=len(SENTENCES), normalize_embeddings=True, convert_to_numpy=True)
    return (
        f"sentence-transformers {sentence_transformers.__version__}",
        model.max_seq_length,
        model.tokenizer,
        [v.tolist() for v in vectors],
    )


def with_transformers():
    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer

    with open(os.path.join(MODEL_DIR, "sentence_bert_config.json")) as f:
        max_len = json.load(f)["max_seq_length"]
    tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
    model = AutoModel.from_pretrained(MODEL_DIR).eval()
    batch = tokenizer(SENTENCES, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    vectors = torch.nn.functional.normalize(pooled, p=2, dim=1)
    return f"transformers {transformers.__version__} + torch mean pooling", max_len, tokenizer, vectors.tolist()


def main():
    try:
        generator, max_len, tokenizer, vectors = with_sentence_transformers()
    except ImportError:
        generator, max_len, tokenizer, vectors = with_transformers()
    word_pieces = [len(tokenizer(s, truncation=False)["input_ids"]) for s in SENTENCES]
    assert max(word_pieces) > max_len, "the long sentence must exceed max_seq_length"
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(
            {
                "model": os.path.basename(os.path.normpath(MODEL_DIR)),
                "generator": generator,
                "max_seq_length": max_len,
                "items": [
                    {"text": s, "word_pieces_untruncated": n, "embedding": [float(x) for x in v]}
                    for s, n, v in zip(SENTENCES, word_pieces, vectors)
                ],
            },
            f,
            ensure_ascii=False,
            indent=1,
        )
        f.write("\n")
    print(f"wrote {OUT}: {len(SENTENCES)} sentences, dim {len(vectors[0])}, {generator}")


if __name__ == "__main__":
    main()
