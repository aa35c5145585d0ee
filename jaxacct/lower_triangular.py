"""Deprecated: ``jaxacct.lower_triangular`` is ``jaxacct.strategies.lower_triangular`` (its name
before the strategies package), the same module object; importing it warns
(``strategies.old_path``)."""

import sys

from jaxacct import strategies

sys.modules[__name__] = strategies.old_path('lower_triangular')
