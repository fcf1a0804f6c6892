"""Checks scripts/minilm/model.py against sentence-transformers' own printed numbers, then
prints its speed. Exit status 0 when every check passes.

    $SA_MINILM_DIR/bin/python scripts/minilm/check.py   (tests/e2e/minilm.test.mjs runs it)

The reference cosines are what sentence-transformers' documentation prints for
model = SentenceTransformer("all-MiniLM-L6-v2"), rounded there to 4 decimals:
  - https://sbert.net/docs/sentence_transformer/usage/usage.html
    (model.similarity(embeddings, embeddings) of three sentences, a printed tensor);
  - https://sbert.net/docs/sentence_transformer/usage/semantic_textual_similarity.html
    (model.similarity(embeddings1, embeddings2), printed as "{:.4f}").
Ours must be within TOLERANCE of every one of them. 1e-4 leaves the 5e-5 of the printed
rounding plus float32 noise, and still fails the tanh approximation of GELU (off by 1.8e-4 on
these pairs), let alone a wrong layer, mask or pooling.

Two vectors of one text that must be the same (the text alone or in a padded batch, a long text
with or without what follows its 256th token) are compared within SAME_VECTOR: float32 matrix
products give the rows of a batch in the last bits differently with another CPU or BLAS build
(the order of the sums depends on the row's place and the kernel), about 1e-7 on these unit
vectors; what follows the 256th token, if it were not cut, moves the vector by about 1e-2.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model  # noqa: E402  (first: it sets up numpy's BLAS threads)
import numpy as np  # noqa: E402

TOLERANCE = 1e-4
SAME_VECTOR = 1e-5

# (source page, sentences a, sentences b, printed cosine of a[i] and b[j] as rows i, columns j)
REFERENCES = [
    (
        "https://sbert.net/docs/sentence_transformer/usage/usage.html",
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."],
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."],
        [[1.0000, 0.6660, 0.1046],
         [0.6660, 1.0000, 0.1411],
         [0.1046, 0.1411, 1.0000]],
    ),
    (
        "https://sbert.net/docs/sentence_transformer/usage/semantic_textual_similarity.html",
        ["The new movie is awesome", "The cat sits outside", "A man is playing guitar"],
        ["The dog plays in the garden", "The new movie is so great", "A woman watches TV"],
        [[0.0543, 0.8939, -0.0502],
         [0.2838, -0.0029, 0.1310],
         [0.2277, -0.0136, -0.0327]],
    ),
]

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        failures.append(what)


def main() -> int:
    t = time.perf_counter()
    m = model.MiniLM()
    print(f"loaded {model.NAME} from {model.model_zip()} in {time.perf_counter() - t:.2f} s")

    for page, a, b, printed in REFERENCES:
        ours = m.embed(a) @ m.embed(b).T
        diff = np.abs(ours - np.array(printed))
        for i, j in np.ndindex(diff.shape):
            check(diff[i, j] <= TOLERANCE,
                  f"cos({a[i]!r}, {b[j]!r}) = {ours[i, j]:+.6f}, printed {printed[i][j]:+.4f}")
        print(f"     max difference {diff.max():.1e} ({page})")

    texts = ["The cat sits outside", "A much longer sentence about the weather in Lisbon in the spring.", ""]
    vecs = m.embed(texts)
    check(vecs.shape == (3, model.DIMS) and vecs.dtype == np.float32, f"shape {vecs.shape}, {vecs.dtype}")
    check(bool(np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-5)), "unit vectors (the empty text too)")
    alone = m.embed(texts[:1])[0]
    check(float(np.abs(alone - vecs[0]).max()) <= SAME_VECTOR, "a text's vector does not depend on its batch's padding")
    ids, _ = m.tokenize(["word " * 400])
    check(ids.shape[1] == model.MAX_SEQ_LENGTH, f"a long text is cut at {model.MAX_SEQ_LENGTH} tokens ({ids.shape[1]})")
    long_a, long_b = m.embed(["word " * 300 + "alpha", "word " * 300 + "omega"])
    check(float(np.abs(long_a - long_b).max()) <= SAME_VECTOR, "what follows the 256th token changes nothing")

    # Speed: short sentences in batches of 32, as the Worker sends them (32 memories a batch).
    short = [f"The user mentioned fact number {i} about their {w} this week."
             for i, w in enumerate(["sister", "car", "garden", "job", "cat", "trip", "flat", "bike"] * 16)]
    m.embed(short[:32])  # warm
    t = time.perf_counter()
    m.embed(short, batch_size=32)
    dt = time.perf_counter() - t
    print(f"speed: {len(short) / dt:.0f} texts/s ({len(short)} short sentences, batches of 32, {dt:.2f} s)")
    t = time.perf_counter()
    for s in short[:32]:
        m.embed([s])
    dt = time.perf_counter() - t
    print(f"speed: {32 / dt:.0f} texts/s one at a time (a search's query)")

    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
