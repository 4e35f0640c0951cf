"""Small image trees the image-folder tests build."""

from __future__ import annotations

from pathlib import Path

from PIL import Image


def save_image(root: Path, rel: str, image: Image.Image) -> None:
    """`image` saved at root/rel, its folders made."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
