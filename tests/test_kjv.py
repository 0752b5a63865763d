"""The King James Bible corpus (odsgd_jax/data/_kjv.py): characters as tokens, split by
book, built offline from Debian's bible-kjv; a generated text of the same form for tests."""

import math
import os
import shutil

import numpy as np
import pytest

from odsgd_jax.data import DataError, open_splits
from odsgd_jax.data import _kjv as kjv


def test_the_split_is_by_book_and_fixed():
  splits = [kjv.split_of(i) for i in range(66)]
  assert [i for i, s in enumerate(splits) if s == "validation"] == [5, 16, 27, 38, 49, 60]
  assert [i for i, s in enumerate(splits) if s == "test"] == [10, 21, 32, 43, 54, 65]
  assert splits.count("train") == 54


def test_text_becomes_books_tokens_and_windows():
  text = "Ge1:1 In the beginning.\nGe1:2 And the earth\nExo1:1 Now these\n"
  assert kjv.books(text) == ["In the beginning.\nAnd the earth", "Now these"]
  tokens = kjv.encode("Abc\n#")
  assert tokens.tolist()[-1] == kjv.UNKNOWN  # "#" is no training character
  assert kjv.decode(tokens[:-1]) == "Abc\n"
  np.testing.assert_array_equal(kjv.windows(np.arange(10), 4), [[0, 1, 2, 3], [4, 5, 6, 7]])
  with pytest.raises(kjv.SourceFilesError, match="line 1"):
    kjv.books("not a verse\n")


def test_the_tiny_corpus_builds_into_token_windows(tmp_path):
  splits = open_splits("kjv_tiny", str(tmp_path))
  assert (len(splits.train), len(splits.validation), len(splits.test)) == (1111, 122, 130)
  tokens = splits.train.read(np.arange(3))["tokens"]
  assert tokens.shape == (3, kjv.TinyKingJamesBible.WINDOW + 1) and tokens.dtype == np.int32
  assert 0 <= tokens.min() and tokens.max() < kjv.VOCABULARY_SIZE
  first = kjv.encode("\n\n".join(b for i, b in enumerate(kjv.books(kjv.tiny_text()))
                                 if kjv.split_of(i) == "train"))[:33]
  windows = splits.train.arrays["tokens"]  # in TFDS's order, shuffled by key
  assert (windows == first).all(1).any()


def test_without_the_package_one_line_names_it_and_nothing_is_written(tmp_path, monkeypatch):
  monkeypatch.setattr(kjv.shutil, "which", lambda command: None)
  with pytest.raises(DataError) as error:
    open_splits("kjv", str(tmp_path / "data"))
  assert "apt-get install bible-kjv" in str(error.value)
  assert "\n" not in str(error.value)
  assert not (tmp_path / "data" / "odsgd_kjv").exists()


@pytest.mark.skipif(shutil.which("bible") is None,
                    reason="needs Debian's bible-kjv (apt-get install bible-kjv)")
def test_the_king_james_bible_builds_with_its_stated_sizes(tmp_path):
  splits = open_splits("kjv", str(tmp_path))
  assert (len(splits.train), len(splits.validation), len(splits.test)) == (27851, 1449, 2775)
  texts = {kjv.decode(window) for window in splits.train.arrays["tokens"]}
  assert any(text.startswith("In the beginning God created the heaven and the earth.\n")
             for text in texts)
  counts = np.bincount(splits.train.arrays["tokens"].ravel(), minlength=kjv.VOCABULARY_SIZE)
  shares = counts[counts > 0] / counts.sum()
  assert math.isclose(-(shares * np.log(shares)).sum(), 3.02, abs_tol=0.01)  # nats per char
  assert os.path.isdir(tmp_path / "odsgd_kjv")
