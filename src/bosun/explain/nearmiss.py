"""Near-miss words: a misspelt keyword or cluster name matched to the word it meant.

Uses the static embedding model that ships *inside* the ``wordllama`` package
(``wordllama/weights/l2_supercat_256.safetensors`` and its tokenizer config). It is
loaded straight from those files: nothing is downloaded, and a missing file is an error,
never a fetch. (wordllama's own ``WordLlama.load`` looks for the tokenizer under a
``tokenizer/`` folder while the wheel ships ``tokenizers/``, so it would try the network.)

A word is matched when its best candidate either has cosine similarity >= :data:`MIN_COSINE`
under the model (token-level: catches ``prioritze``, ``databse``, ``fragmentaton``) or a
character ratio >= :data:`MIN_RATIO` (``difflib``: catches short words the model splits
badly, ``kep``, ``sprad``), and beats the runner-up by :data:`MIN_MARGIN` on the mean of
both scores. Otherwise the word is left as it is (and the policy parser refuses what it
cannot resolve).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from bosun.errors import BosunError

MIN_COSINE = 0.45
MIN_RATIO = 0.8
MIN_MARGIN = 0.1
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"


@lru_cache(maxsize=1)
def load_model() -> Any:
    """wordllama's bundled 256-d model, from the package's own files (no download).

    Raises:
        BosunError: the package or its bundled files are missing.
    """
    try:
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference
    except ImportError as e:  # pragma: no cover - installed with bosun's extras
        raise BosunError(f"the wordllama package is needed for near-miss words: {e}") from None
    root = Path(wordllama.__file__).parent
    weights, tok = root / _WEIGHTS, root / _TOKENIZER
    for f in (weights, tok):
        if not f.is_file():
            raise BosunError(f"wordllama's bundled model file is missing: {f}")
    tokenizer = Tokenizer.from_file(str(tok))
    with safe_open(str(weights), framework="np", device="cpu") as fh:
        embedding = fh.get_tensor("embedding.weight")
    return WordLlamaInference(embedding, tokenizer)


class NearMiss:
    """Matches unknown words against a fixed vocabulary.

    Args:
        vocabulary: the known words (keywords, cluster names).
    """

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.vocabulary = sorted(set(vocabulary))
        self._model = load_model()
        self._vectors = (
            self._model.embed(self.vocabulary, norm=True)
            if self.vocabulary
            else np.zeros((0, 256), dtype=np.float32)
        )

    def match(self, word: str) -> tuple[str, float] | None:
        """The vocabulary word ``word`` most likely meant, with its score, or None."""
        if not self.vocabulary:
            return None
        vec = self._model.embed([word], norm=True)
        cos = (self._vectors @ vec.T).ravel()
        ratio = np.array([difflib.SequenceMatcher(None, word, v).ratio() for v in self.vocabulary])
        score = (cos + ratio) / 2
        order = np.argsort(-score)
        best = int(order[0])
        if not (cos[best] >= MIN_COSINE or ratio[best] >= MIN_RATIO):
            return None
        if len(order) > 1 and score[best] - score[int(order[1])] < MIN_MARGIN:
            return None
        return self.vocabulary[best], float(score[best])
