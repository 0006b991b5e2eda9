"""Build the slow corpus of :mod:`tests.build_diff.corpus` into ``argv[1]``: decomp, copies, q8, q8_keep."""

import sys

from tests.build_diff.corpus import main

if __name__ == "__main__":
    sys.exit(main([sys.argv[1], "slow"]))
