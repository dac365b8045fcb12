"""`python -m ci_matrix` works the same as the `ci-matrix` command."""

import sys

from ci_matrix.cli import main

sys.exit(main())
