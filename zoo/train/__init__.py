"""The one training loop: pure init/step functions, checkpoints, and the loop that drives them."""
