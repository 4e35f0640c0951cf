"""A token directory the streamed-data tests read (tests/data/test_stream*.py)."""

import pytest

from zoo.data import prepare


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    (root / "corpus.txt").write_text("".join(f"line {i}: some text to read\n" for i in range(400)))
    prepare.prepare("text", str(root / "corpus.txt"), str(root / "tok"), "char")
    return root / "tok"
