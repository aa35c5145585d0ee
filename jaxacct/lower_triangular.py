"""``jaxacct.lower_triangular`` is ``jaxacct.strategies.lower_triangular`` (its name before the strategies
package): the same module object, so every name and patch of either path is shared."""

import sys

from jaxacct.strategies import lower_triangular as _module

sys.modules[__name__] = _module
