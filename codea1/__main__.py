"""`python -m codea1`: the `codea1` command."""

from codea1.cli import main

if __name__ == "__main__":
    main()
