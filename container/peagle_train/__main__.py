"""`python -m peagle_train train` (SageMaker runs `docker run IMAGE train`)."""

from __future__ import annotations

import sys

from peagle_train.driver import main

if __name__ == "__main__":
    sys.exit(main())
