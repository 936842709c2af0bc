"""``python -m mme_triton.cli`` runs the ``mme-triton`` command line (as ``python -m mme_triton`` does)."""

import sys

from mme_triton.cli import main

if __name__ == "__main__":
    sys.exit(main())
