"""Resident memory of the numpy index's bookkeeping at 100k memories (standalone; not run by pytest).

Each figure is measured in a fresh subprocess (VmRSS before and after filling): the memory
index's rows (100k vectors of 384 dims with their ids and content digests) and the question
index's question -> memory map (2, 4 or 6 written questions per memory), and the question
index's rows (vectors included) holding every question or the newest ``--question-rows``
(``NUMPY_QUESTION_ROWS``). With ``--baseline
DIR`` (a checkout of an older tree) the same is measured on that tree's code, side by side.

    python bench/vector_index_rss.py [--memories 100000] [--baseline ../wt-base]
        [--question-rows 100000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FILL = r'''
import hashlib, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
what, memories, per = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(1)
if what == "rows":
    try:
        from pawwake.search.vector_matrix import Matrix
    except ImportError:
        from pawwake.search.vector_index import _Matrix as Matrix
    vectors = rng.standard_normal((1000, 384)).astype(np.float32)
    before = rss()
    matrix = Matrix(384, capacity=int(memories * 1.1) + 64)
    for i in range(memories):
        matrix.append(1000 + i, hashlib.sha256(str(i).encode()).hexdigest(), vectors[i % 1000])
    vector_mb = memories * 384 * 4 / 2**20
    print(f"{rss() - before - vector_mb:.1f}")
elif what == "question rows":  # the question index's rows, vectors included, as loaded
    from pawwake.search.vector_matrix import Matrix
    held = int(sys.argv[5]) if len(sys.argv) > 5 else memories * per
    held = min(held, memories * per)
    vectors = rng.standard_normal((1000, 384)).astype(np.float32)
    before = rss()
    matrix = Matrix(384, capacity=max(1024, int(held * 1.1) + 64))
    for i in range(held):
        matrix.append(10_000 + i, hashlib.sha256(str(i).encode()).hexdigest(), vectors[i % 1000])
    print(f"{rss() - before:.1f}")
else:
    from pawwake.memory.question_vectors import QuestionVectors
    pairs = ((10_000 + q, 1000 + q // per) for q in range(memories * per))  # made as read
    before = rss()
    held = QuestionVectors(None)
    if hasattr(held, "owners"):
        held.owners.learn(pairs)
    else:
        held._learn(pairs)
    print(f"{rss() - before:.1f}")
'''


def measured(tree: Path, what: str, memories: int, per: int, *more: str) -> float:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, "-c", FILL, str(tree), what, str(memories),
                           str(per), *more], capture_output=True, text=True, check=True,
                          env=env)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--question-rows", type=int, default=100_000,
                        help="the numpy question index's bound (NUMPY_QUESTION_ROWS)")
    args = parser.parse_args()
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())]
                                     if args.baseline else [])
    print(f"{args.memories} memories; MB resident beyond the vectors themselves"
          f" ({args.memories * 384 * 4 / 2**20:.0f} MB of float32 rows); load"
          f" {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for label, tree in trees:
        print(f"{label:10} memory index rows (ids, digests): "
              f"{measured(tree, 'rows', args.memories, 0):6.1f} MB")
    for per in (2, 4, 6):
        for label, tree in trees:
            print(f"{label:10} question map, {per} questions a memory: "
                  f"{measured(tree, 'questions', args.memories, per):6.1f} MB")
    for per in (2, 4, 6):  # the rows themselves: every question, or the numpy bound's
        for most in (None, args.question_rows):
            held = "all" if most is None else f"newest {most}"
            extra = () if most is None else (str(most),)
            print(f"this tree  question index rows, {per} questions a memory, {held}: "
                  f"{measured(ROOT, 'question rows', args.memories, per, *extra):6.1f} MB")


if __name__ == "__main__":
    main()
