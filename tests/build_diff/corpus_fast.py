"""Build the fast corpus of :mod:`tests.build_diff.corpus` into ``argv[1]``: base, naive, rebuild, offload."""

import sys

from tests.build_diff.corpus import main

if __name__ == "__main__":
    sys.exit(main([sys.argv[1], "fast"]))
