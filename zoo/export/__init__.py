"""Export a trained run in SP form (`python -m zoo.export RUN_DIR --out DIR`): every multiplier folded into the
weights (fold.py), written as orbax + safetensors + an `sp` config (sp_form.py)."""

from zoo.export.sp_form import export

__all__ = ["export"]
