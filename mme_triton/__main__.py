"""``python -m mme_triton`` runs the ``mme-triton`` command line."""

import sys

from mme_triton.cli import main

sys.exit(main())
