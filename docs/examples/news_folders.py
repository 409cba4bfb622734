"""The embedded corpus as folders of text files, the layout `stc` and `stc.readers.load_corpus` read."""
from pathlib import Path
from stc.datasets import load_newsgroups_split

# news/train/<group>/<n>.txt and news/test/<group>/<n>.txt, each word repeated by its count
for split, bunch in zip(["train", "test"], load_newsgroups_split()):
    for n, (row, label) in enumerate(zip(bunch.data, bunch.target)):
        folder = Path("news", split, bunch.target_names[label])
        folder.mkdir(parents=True, exist_ok=True)
        words = [w for w, c in zip(bunch.vocabulary[row.indices], row.data) for _ in range(int(c))]
        (folder / f"{n}.txt").write_text(" ".join(words))
