"""``python -m jaxacct.cli`` runs the ``jaxacct`` command."""

import sys

from jaxacct.cli._entry import main

sys.exit(main())
