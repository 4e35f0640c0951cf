"""Train a zoo model: `python train.py --model vit --param depth_mup`. See `python train.py --help`."""

from zoo.cli.train import main

if __name__ == "__main__":
    main()
