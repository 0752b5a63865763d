"""The King James Bible as characters, for next-token prediction (issue 76).

The text comes from Debian's `bible-kjv` (offline): `bible -f "Gen1:1-Rev22:21"` prints its
31,102 verses, one per line, each after its reference ("Ge1:1 In the beginning ...").
A book's text is its verses, one per line, without the references.

The split is by book, fixed before any run: of the 66 books in order (0-based), those at
positions i % 11 == 5 are validation (Joshua, Esther, Hosea, Malachi, Philippians,
2 Peter) and i % 11 == 10 test (1 Kings, Song of Solomon, Micah, Acts, 2 Timothy,
Revelation); the 54 others train (3.59 million characters; validation 0.19, test 0.36).
Each split's books are joined by a blank line and cut into windows of WINDOW + 1 tokens
(a model reads WINDOW of them and predicts each next one), the last partial window dropped.

Tokens are characters. The vocabulary is the training split's: its 63 distinct characters
(`VOCABULARY`, checked against the text when the data set is built), and one more id for
any other character of validation or test (`UNKNOWN`; the text has none).
"""

import re
import shutil
import subprocess
from typing import Sequence

import numpy as np
import tensorflow_datasets as tfds

from odsgd_jax.data._fashion_mnist import SourceFilesError

COMMAND = ("bible", "-f", "Gen1:1-Rev22:21")
WINDOW = 128  # tokens a model reads per example
VOCABULARY = "\n !'(),-.:;?ABCDEFGHIJKLMNOPQRSTUVWYZabcdefghijklmnopqrstuvwxyz"
UNKNOWN = len(VOCABULARY)  # the id of a character outside the training split's
VOCABULARY_SIZE = len(VOCABULARY) + 1
_VERSE = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")
_IDS = {character: index for index, character in enumerate(VOCABULARY)}


def split_of(book: int) -> str:
  """The split of the book at 0-based position `book` of the 66."""
  return {5: "validation", 10: "test"}.get(book % 11, "train")


def read_text(source: str | None = None) -> str:
  """The verses as `bible -f` prints them: from the file `source`, else from the command.

  Raises:
    SourceFilesError: no file there, or the command is not installed.
  """
  if source is not None:
    try:
      with open(source, encoding="utf-8") as f:
        return f.read()
    except OSError as error:
      raise SourceFilesError(f"cannot read the King James Bible text {source}: {error}") from error
  if shutil.which(COMMAND[0]) is None:
    raise SourceFilesError("the King James Bible text is not installed: install it with "
                           "`apt-get install bible-kjv`")
  return subprocess.run(COMMAND, check=True, capture_output=True, text=True, timeout=120).stdout


def books(text: str) -> list[str]:
  """Each book's text, in order: its verses, one per line, without their references.

  Raises:
    SourceFilesError: a line that is not a verse.
  """
  found: list[tuple[str, list[str]]] = []
  for number, line in enumerate(text.splitlines(), start=1):
    verse = _VERSE.match(line)
    if verse is None:
      raise SourceFilesError(f"line {number} of the King James Bible text is not a verse "
                             f"(\"Ge1:1 In the beginning ...\"): {line[:60]!r}")
    if not found or found[-1][0] != verse.group(1):
      found.append((verse.group(1), []))
    found[-1][1].append(verse.group(4))
  return ["\n".join(verses) for _, verses in found]


def encode(text: str) -> np.ndarray:
  return np.asarray([_IDS.get(character, UNKNOWN) for character in text], np.int32)


def decode(tokens: Sequence[int]) -> str:
  return "".join(VOCABULARY[t] if t < UNKNOWN else "\ufffd" for t in tokens)


def windows(tokens: np.ndarray, length: int = WINDOW + 1) -> np.ndarray:
  """Consecutive windows of `length` tokens (the last partial one dropped)."""
  count = len(tokens) // length
  return tokens[:count * length].reshape(count, length)


def split_texts(all_books: Sequence[str]) -> dict[str, str]:
  """{split: its books joined by a blank line}, checked: the training split's characters
  are `VOCABULARY`."""
  texts = {name: "\n\n".join(book for i, book in enumerate(all_books) if split_of(i) == name)
           for name in ("train", "validation", "test")}
  training = set(texts["train"])
  if training != set(VOCABULARY):
    raise SourceFilesError(
        f"the King James Bible text's training books hold other characters than the "
        f"vocabulary: {''.join(sorted(training ^ set(VOCABULARY)))!r} (a different edition?)")
  return texts


class KingJamesBible(tfds.core.GeneratorBasedBuilder):
  """The King James Bible, characters as tokens, split by book (the module's docstring).

  Args (besides TFDS's):
    source: a file holding the verses as `bible -f` prints them (tests write a small one),
      or None: the installed `bible` command's.
  """

  name = "odsgd_kjv"
  VERSION = tfds.core.Version("1.0.0")
  WINDOW = WINDOW

  def __init__(self, *, source: str | None = None, **kwargs):
    super().__init__(**kwargs)
    self._source = source

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=("The King James Bible (Debian's bible-kjv), characters as tokens, "
                     f"windows of {self.WINDOW + 1}; split by book."),
        features=tfds.features.FeaturesDict({
            "tokens": tfds.features.Tensor(shape=(self.WINDOW + 1,), dtype=np.int32)}),
        homepage="https://packages.debian.org/bible-kjv",
    )

  def source_files(self) -> dict[str, str]:
    """Checks that the text is there (before anything is written)."""
    if self._source is None and shutil.which(COMMAND[0]) is None:
      read_text(None)  # raises, saying how to install it
    return {"text": self._source or " ".join(COMMAND)}

  def _split_generators(self, dl_manager):
    texts = split_texts(books(self.text()))
    return {name: self._generate_examples(windows(encode(text), self.WINDOW + 1))
            for name, text in texts.items()}

  def text(self) -> str:
    return read_text(self._source)

  def _generate_examples(self, sequences):
    for index, sequence in enumerate(sequences):
      yield index, {"tokens": sequence}


def tiny_text(verses_per_book: int = 12, seed: int = 0) -> str:
  """A small generated text in `bible -f`'s form: 66 books of verses of random words over
  the vocabulary's letters, each book also holding every character of the vocabulary (so
  that its training books have the vocabulary), for tests."""
  rng = np.random.default_rng(seed)
  letters = [c for c in VOCABULARY if c.isalpha()]
  words = ["".join(rng.choice(letters, size=rng.integers(1, 8))) for _ in range(60)]
  punctuation = [c for c in VOCABULARY if not c.isalnum() and c not in "\n "]
  lines = []
  for book in range(66):
    name = f"B{chr(ord('a') + book // 26)}{chr(ord('a') + book % 26)}"
    for verse in range(1, verses_per_book + 1):
      text = " ".join(rng.choice(words, size=rng.integers(5, 15)))
      if verse == 1:
        text += " " + "".join(VOCABULARY[1:])
      text += str(rng.choice(punctuation))
      lines.append(f"{name}1:{verse} {text}")
  return "\n".join(lines) + "\n"


class TinyKingJamesBible(KingJamesBible):
  """`tiny_text`, built like the King James Bible, in windows of 33: what the tests train."""

  name = "odsgd_kjv_tiny"
  WINDOW = 32

  def source_files(self) -> dict[str, str]:
    return {}

  def text(self) -> str:
    return tiny_text()
