"""``python -m jaxacct`` runs the ``jaxacct`` command."""

import sys

from jaxacct.cli import main

sys.exit(main())
