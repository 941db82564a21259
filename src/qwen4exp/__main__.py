"""`python -m qwen4exp ...`: the same command line as the `qwen4exp` script."""

import sys

from qwen4exp.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
