"""``python -m decodekit`` (and ``torchrun -m decodekit``) runs the command line."""

from decodekit.cli import main

if __name__ == "__main__":
    main()
